"""``ivmstream serve`` as a user starts it, with a bearer token from a file and TLS: HTTPS only with the
certificate's CA, every /v1 request refused without the token, and the token in none of its output;
a PostgreSQL DSN's password stays out of its error line."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
from helpers import REPO, cli_env, ivm
from secure_redis import make_pki

from ivmstream.dev.redis_server import free_port

TOKEN = "planted-serve-token-Rk29dq"


def test_serve_over_tls_with_a_token_from_a_file(redis_server, tmp_path: Path):
    pki = make_pki(tmp_path / "pki")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    env = {**cli_env(), "IVMSTREAM_SERVE_TOKEN_FILE": str(token_file), "IVMSTREAM_LOG_LEVEL": "DEBUG"}
    args = ["serve", "--redis", redis_server.url, "--port", str(port)]
    args += ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"https://127.0.0.1:{port}"
    try:
        with httpx.Client(verify=ssl.create_default_context(cafile=pki.ca), timeout=10) as https:
            deadline = time.monotonic() + 30
            while True:
                try:
                    https.get(f"{base}/healthz")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline
                    time.sleep(0.1)
            assert https.get(f"{base}/v1/services").status_code == 401
            ok = https.get(f"{base}/v1/services", headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200 and "services" in ok.json()
        with httpx.Client(verify=ssl.create_default_context(cafile=pki.other_ca), timeout=10) as untrusting:
            try:
                untrusting.get(f"{base}/healthz")
                raise AssertionError("a client trusting another CA reached the server")
            except httpx.ConnectError:
                pass
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    text = out.decode(errors="replace")
    assert "bearer token required" in text
    assert TOKEN not in text


def test_an_unreachable_postgresql_is_one_line_without_its_password():
    port = free_port()
    proc = ivm("serve", "--postgres", f"postgresql://ivm:planted-pg-Xy71@127.0.0.1:{port}/db", check=False)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ivmstream: error: cannot reach PostgreSQL"), proc.stderr
    assert "planted-pg-Xy71" not in proc.stderr and "***" in proc.stderr
