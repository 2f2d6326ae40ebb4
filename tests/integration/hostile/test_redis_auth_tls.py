"""Redis with a password, an ACL user and TLS with client certificates, for real (secure_redis.py).

Each credential source (the URL, IVMSTREAM_REDIS_* variables, their _FILE variants) is shown to
authenticate, each wrong or missing credential to fail with one line that names the problem and never
the secret, and a worker to run end to end over TLS as the ACL user with its password in a file: its
results equal an offline replay, and no secret appears in its log, metrics, Redis or results topic.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
import redis
from cli_runs import key_body_lines, leaks, run_cli, start_cli, stop
from helpers import SAMPLE, ivm_produce, offline_results, read_topic, stream_config
from secure_redis import ACL_PASSWORD, ACL_USER, DEFAULT_PASSWORD, SecureRedis

from ivmstream.dev.redis_server import free_port
from ivmstream.redis_client import RedisUnavailable, connect
from ivmstream.runtime.progress import wait_caught_up

SECRETS = (DEFAULT_PASSWORD, ACL_PASSWORD)


def refusal(url: str) -> str:
    with pytest.raises(RedisUnavailable) as info:
        connect(url, timeout=3.0)
    message = str(info.value)
    assert not leaks(SECRETS, message=message), message
    return message


def test_requirepass_default_user(secure_redis: SecureRedis) -> None:
    client = connect(secure_redis.plain_url("", DEFAULT_PASSWORD))
    assert client.ping() and client.acl_whoami() == "default"
    assert "needs a password and none was given" in refusal(secure_redis.plain_url())
    line = refusal(secure_redis.plain_url("", "not-the-password"))
    assert "refused the credentials" in line and ":***@" in line


def test_acl_user_from_the_url(secure_redis: SecureRedis) -> None:
    client = connect(secure_redis.plain_url(ACL_USER, ACL_PASSWORD))
    assert client.acl_whoami() == ACL_USER
    with pytest.raises(redis.exceptions.NoPermissionError):  # the ACL applies: FLUSHALL is @dangerous
        client.flushall()
    line = refusal(secure_redis.plain_url(ACL_USER, "wrong-password-1234"))
    assert "refused the credentials" in line and f"{ACL_USER}:***@" in line


def test_credentials_from_environment_and_files(
    secure_redis: SecureRedis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text(ACL_PASSWORD + "\n")  # a trailing newline, as editors and `echo` leave
    monkeypatch.setenv("IVMSTREAM_REDIS_USERNAME", ACL_USER)
    monkeypatch.setenv("IVMSTREAM_REDIS_PASSWORD_FILE", str(secret))
    assert connect(secure_redis.plain_url()).acl_whoami() == ACL_USER
    monkeypatch.delenv("IVMSTREAM_REDIS_USERNAME")  # the URL names the user, the file its password
    assert connect(secure_redis.plain_url(ACL_USER)).acl_whoami() == ACL_USER
    monkeypatch.delenv("IVMSTREAM_REDIS_PASSWORD_FILE")
    monkeypatch.setenv("IVMSTREAM_REDIS_PASSWORD", DEFAULT_PASSWORD)
    assert connect(secure_redis.plain_url()).acl_whoami() == "default"
    monkeypatch.setenv("IVMSTREAM_REDIS_PASSWORD_FILE", str(secret))
    assert "not both" in refusal_of_secret_source(secure_redis)
    monkeypatch.delenv("IVMSTREAM_REDIS_PASSWORD")
    monkeypatch.setenv("IVMSTREAM_REDIS_PASSWORD_FILE", str(tmp_path / "absent"))
    line = refusal_of_secret_source(secure_redis)
    assert "cannot read IVMSTREAM_REDIS_PASSWORD_FILE" in line and "No such file" in line


def refusal_of_secret_source(server: SecureRedis) -> str:
    from ivmstream.secrets import SecretError

    with pytest.raises(SecretError) as info:
        connect(server.plain_url())
    return str(info.value)


def test_tls_with_client_certificate(secure_redis: SecureRedis) -> None:
    client = connect(secure_redis.tls_url(ACL_USER, ACL_PASSWORD))
    assert client.acl_whoami() == ACL_USER
    assert client.connection_pool.connection_class is redis.SSLConnection
    # a CA that did not sign the server's certificate: the client refuses the server
    line = refusal(secure_redis.tls_url(ACL_USER, ACL_PASSWORD, ca=secure_redis.pki.other_ca))
    assert "certificate verify failed" in line
    # no client certificate: the server refuses the client (tls-auth-clients yes)
    bare = secure_redis.tls_url(ACL_USER, ACL_PASSWORD).split("&ssl_certfile")[0]
    assert "cannot reach Redis" in refusal(bare)
    # plain text to the TLS port: refused too
    assert "Redis at" in refusal(f"redis://{ACL_USER}:{ACL_PASSWORD}@127.0.0.1:{secure_redis.tls_port}/0")


def test_worker_over_tls_as_acl_user_end_to_end(
    secure_redis: SecureRedis, broker, unique: str, tmp_path: Path
) -> None:
    """State in Redis and results published there, over TLS, password from a file: nothing leaks."""
    secret = tmp_path / "redis-password"
    secret.write_text(ACL_PASSWORD)
    env = {"IVMSTREAM_REDIS_PASSWORD_FILE": str(secret), "IVMSTREAM_LOG_LEVEL": "DEBUG"}
    url = secure_redis.tls_url(ACL_USER)  # the user in the URL, no password anywhere on the command line
    config = stream_config(tmp_path / "c.json", unique, key_field="store", checkpoint_interval=0.2)
    topic = f"{unique}.updates"
    broker.create_topic(topic, 2)
    ivm_produce(broker.bootstrap, topic, SAMPLE, key_field="store")
    port = free_port()
    args = ["run", "reference", "--bootstrap", broker.bootstrap, "--config", str(config)]
    args += ["--group", f"{unique}-g", "--state-backend", "redis", "--redis", url]
    args += ["--metrics-port", str(port)]
    log = tmp_path / "worker.log"
    proc = start_cli(*args, log=log, env=env)
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-g", topic, timeout=90)
        metrics = _scrape(port)
    finally:
        assert stop(proc) == 0, log.read_text()
    results = run_cli("results", "reference", "--redis", url, "--topic", f"{unique}.results", env=env)
    assert results.returncode == 0, results.stderr
    published = {k: rec["result"] for k, rec in json.loads(results.stdout).items()}
    assert published == offline_results(config, SAMPLE)

    admin = connect(secure_redis.plain_url("", DEFAULT_PASSWORD))
    stored = b"".join(k + (admin.dump(k) or b"") for k in admin.scan_iter(f"*{unique}*"))
    assert len(published) > 1 and stored, "the worker published or stored nothing"
    topic_bytes = b"".join(m.value() or b"" for m in read_topic(broker.bootstrap, f"{unique}.results"))
    secrets = [*SECRETS, *key_body_lines(secure_redis.pki.client_key_text())]
    assert not leaks(
        secrets,
        worker_log=log.read_bytes(),
        metrics=metrics,
        results_stdout=results.stdout,
        results_stderr=results.stderr,
        redis=stored,
        results_topic=topic_bytes,
    )
    assert "DEBUG" in log.read_text()  # the log was verbose, so its silence on secrets means something


def _scrape(port: int, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
