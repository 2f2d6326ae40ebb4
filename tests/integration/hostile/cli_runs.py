"""Running the ``ivmstream`` CLI with credentials in its environment, and searching what it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any IVMSTREAM_ credential variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IVMSTREAM_REDIS_", "IVMSTREAM_KAFKA_"))}
    env.setdefault("IVMSTREAM_LOG_LEVEL", "WARNING")
    env.update(extra or {})
    return env


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ivmstream.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(env),
        cwd=REPO,
    )


def start_cli(*args: str, log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ivmstream.cli", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cli_env(env),
            cwd=REPO,
        )


def stop(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def leaks(secrets: Iterable[str], **outputs: str | bytes) -> list[str]:
    """Which planted secret shows up in which output (empty: none does)."""
    found = []
    for name, text in outputs.items():
        data = text.encode() if isinstance(text, str) else text
        for secret in secrets:
            if secret.encode() in data:
                found.append(f"{secret!r} in {name}")
    return found


def key_body_lines(pem: str) -> list[str]:
    """The base64 lines of a PEM key: any one of them appearing would leak part of the key."""
    return [line for line in pem.splitlines() if line and not line.startswith("-----")]
