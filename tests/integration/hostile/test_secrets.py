"""Planted secrets never appear in anything the CLI writes: error lines, logs, --help, debug tracebacks.

Secrets are planted where users put them (a Redis URL, Kafka SASL and TLS settings in the environment,
in files, in a config's ``kafka`` section, a TLS key file) and every output of each run is searched.
The Kafka settings are also shown to reach librdkafka: its own configuration dump and its errors name
them (the embedded broker has no SASL handshake and no TLS listener, which those errors prove too).
"""

from __future__ import annotations

import json
import logging
import string
from pathlib import Path
from urllib.parse import quote

import pytest
from cli_runs import key_body_lines, leaks, run_cli
from confluent_kafka import KafkaException, Producer
from helpers import write_config
from hypothesis import given
from hypothesis import strategies as st
from secure_redis import make_pki

from ivmstream import secrets
from ivmstream.dev.redis_server import free_port
from ivmstream.runtime.kafka import consumer_settings, producer_settings

PASSWORD = "s3cret-Planted-7781"
SASL_PASSWORD = "sasl-Planted-9d21f0"
KEY_PASSWORD = "keypass-Planted-3e4a"
CONFIG_PASSWORD = "config-Planted-55aa10"
PLANTED = (PASSWORD, SASL_PASSWORD, KEY_PASSWORD, CONFIG_PASSWORD)


def one_line(proc) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ivmstream: error: "), proc.stderr
    return lines[0]


def assert_no_leak(proc, *extra: str) -> None:
    found = leaks([*PLANTED, *extra], stdout=proc.stdout, stderr=proc.stderr)
    assert not found, (found, proc.stderr)


# --- the Redis URL ------------------------------------------------------------------------------------


def test_results_error_masks_the_url_password() -> None:
    proc = run_cli("results", "vwap", "--redis", f"redis://user:{PASSWORD}@127.0.0.1:1/0")
    line = one_line(proc)
    assert "redis://user:***@127.0.0.1:1/0" in line and "Connection refused" in line
    assert_no_leak(proc)


def test_debug_traceback_masks_the_url_password() -> None:
    proc = run_cli(
        "results", "vwap", "--redis", f"redis://user:{PASSWORD}@127.0.0.1:1/0", env={"IVMSTREAM_DEBUG": "1"}
    )
    assert proc.returncode != 0 and "Traceback (most recent call last)" in proc.stderr
    assert "RedisUnavailable" in proc.stderr
    assert_no_leak(proc)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://user:{PASSWORD}@127.0.0.1:1/0?socket_keepalive=maybe",
        f"redis://user:{PASSWORD}@127.0.0.1:1/0?unknown_option=1",
        f"rediss://user:{PASSWORD}@127.0.0.1:1/0?ssl_ca_certs=/nonexistent.pem",
        f"redis://user:{PASSWORD}@[::1/0",
        f"unix://user:{PASSWORD}@/nonexistent.sock",
    ],
)
@pytest.mark.parametrize("debug", ["", "1"])
def test_bad_and_unreachable_urls(url: str, debug: str) -> None:
    proc = run_cli("results", "vwap", "--redis", url, env={"IVMSTREAM_DEBUG": debug} if debug else None)
    if not debug:
        one_line(proc)
    assert proc.returncode != 0
    assert_no_leak(proc)


def test_worker_with_password_url_and_debug_logging(tmp_path: Path, broker) -> None:
    """``run`` logs at DEBUG, then fails on the unreachable Redis: neither shows the password."""
    config = write_config(tmp_path / "c.json", key_field="store")
    url = f"redis://user:{PASSWORD}@127.0.0.1:{free_port()}/0"
    args = ["run", "reference", "--bootstrap", broker.bootstrap, "--config", str(config), "--redis", url]
    for env in ({"IVMSTREAM_LOG_LEVEL": "DEBUG"}, {"IVMSTREAM_LOG_LEVEL": "DEBUG", "IVMSTREAM_DEBUG": "1"}):
        proc = run_cli(*args, "--state-dir", str(tmp_path / "s"), env=env)
        assert proc.returncode != 0 and "user:***@" in proc.stderr
        assert_no_leak(proc)


def test_secret_files_that_cannot_be_read_name_the_variable(tmp_path: Path) -> None:
    env = {"IVMSTREAM_REDIS_PASSWORD_FILE": str(tmp_path / "absent")}
    line = one_line(run_cli("results", "vwap", "--redis", "redis://127.0.0.1:1/0", env=env))
    assert "cannot read IVMSTREAM_REDIS_PASSWORD_FILE" in line
    env = {"IVMSTREAM_REDIS_PASSWORD_FILE": str(tmp_path), "IVMSTREAM_REDIS_PASSWORD": PASSWORD}
    proc = run_cli("results", "vwap", "--redis", "redis://127.0.0.1:1/0", env=env)
    assert "not both" in one_line(proc)
    assert_no_leak(proc)


# --- --help ---------------------------------------------------------------------------------------------


def test_help_of_every_command_shows_no_secret(tmp_path: Path) -> None:
    env = kafka_env(tmp_path) | {"IVMSTREAM_REDIS_PASSWORD": PASSWORD}
    commands = ["", "broker", "produce", "run", "results", "replay", "bootstrap", "reconcile", "demo"]
    for command in commands:
        proc = run_cli(*([command] if command else []), "--help", env=env)
        assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr
        assert_no_leak(proc)


# --- Kafka ----------------------------------------------------------------------------------------------


def kafka_env(tmp_path: Path, protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    secret = tmp_path / "sasl-password"
    secret.write_text(SASL_PASSWORD + "\n")
    return {
        "IVMSTREAM_KAFKA_SECURITY_PROTOCOL": protocol,
        "IVMSTREAM_KAFKA_SASL_MECHANISM": "PLAIN",
        "IVMSTREAM_KAFKA_SASL_USERNAME": "ivm",
        "IVMSTREAM_KAFKA_SASL_PASSWORD_FILE": str(secret),
    }


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_sasl_settings_reach_librdkafka(tmp_path: Path, broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the environment (password in a file) into librdkafka: its configuration dump shows the
    protocol and mechanism and masks the password, and it then tries a SASL handshake on the embedded
    broker, which has none."""
    for k, v in kafka_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    captured = Captured()
    log = logging.getLogger("test.kafka.sasl")
    log.addHandler(captured)
    log.setLevel(logging.DEBUG)
    conf = producer_settings(broker.bootstrap, {"debug": "conf,security,broker", "logger": log})
    assert conf["sasl.password"] == SASL_PASSWORD and conf["security.protocol"] == "SASL_PLAINTEXT"
    producer = Producer(conf)
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=3)
    producer.poll(0.5)
    text = "\n".join(captured.lines)
    assert "security.protocol = sasl_plaintext" in text
    assert "sasl.mechanisms = PLAIN" in text
    assert "SASL Handshake not supported by broker (required by mechanism PLAIN)" in text
    assert SASL_PASSWORD not in text
    # the consumer's settings carry them too (under the config's kafka section)
    consumer = consumer_settings(broker.bootstrap, "g", 6000, {"sasl.username": "other"})
    assert consumer["security.protocol"] == "SASL_PLAINTEXT" and consumer["sasl.username"] == "other"


def test_tls_settings_reach_librdkafka_through_the_cli(tmp_path: Path, broker) -> None:
    """``run`` with TLS settings in the environment: librdkafka loads the CA file (so a missing one is
    an error naming ssl.ca.location), and with a real key and certificate it tries TLS on the embedded
    broker's plain port. The key's text and its password never appear."""
    pki = make_pki(tmp_path / "pki")
    config = write_config(tmp_path / "c.json", key_field="store")
    args = ["run", "reference", "--bootstrap", broker.bootstrap, "--config", str(config)]
    args += ["--state-dir", str(tmp_path / "s")]
    key_lines = key_body_lines(pki.client_key_text())
    env = {
        "IVMSTREAM_KAFKA_SECURITY_PROTOCOL": "SSL",
        "IVMSTREAM_KAFKA_SSL_CA_LOCATION": str(tmp_path / "absent-ca.pem"),
        "IVMSTREAM_KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD,
    }
    line = one_line(proc := run_cli(*args, env=env))
    assert "ssl.ca.location" in line
    assert_no_leak(proc, *key_lines)
    env |= {
        "IVMSTREAM_KAFKA_SSL_CA_LOCATION": str(pki.ca),
        "IVMSTREAM_KAFKA_SSL_CERTIFICATE_LOCATION": str(pki.client_cert),
        "IVMSTREAM_KAFKA_SSL_KEY_LOCATION": str(pki.client_key),
        "IVMSTREAM_LOG_LEVEL": "DEBUG",
        "IVMSTREAM_DEBUG": "1",
    }
    proc = run_cli(*args, env=env)
    assert proc.returncode != 0 and "cannot reach Kafka" in proc.stderr
    assert_no_leak(proc, *key_lines)


def test_config_file_kafka_secrets_are_masked(tmp_path: Path, broker) -> None:
    """A password in the config's kafka section (as the Helm chart renders it) stays out of the output,
    also when librdkafka logs its configuration at debug level."""
    kafka = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "ivm"}
    kafka |= {"sasl.password": CONFIG_PASSWORD, "debug": "conf,security"}
    roles = {"consumer": kafka, "producer": kafka}
    config = write_config(tmp_path / "c.json", key_field="store", kafka=roles)
    args = ["run", "reference", "--bootstrap", broker.bootstrap, "--config", str(config)]
    proc = run_cli(*args, "--state-dir", str(tmp_path / "s"), env={"IVMSTREAM_LOG_LEVEL": "DEBUG"})
    assert proc.returncode != 0 and "cannot reach Kafka" in proc.stderr
    assert_no_leak(proc)
    proc = run_cli("replay", "reference", "--config", str(config), "--input", str(tmp_path / "absent.jsonl"))
    one_line(proc)
    assert_no_leak(proc)


# --- the redaction functions --------------------------------------------------------------------------

SECRET_TEXT = st.text(string.ascii_letters + string.digits + "-_.~!$&'()*+,;=", min_size=8, max_size=40)


@given(SECRET_TEXT, st.sampled_from(["redis", "rediss", "unix", "kafka"]))
def test_redact_url_masks_any_password(password: str, scheme: str) -> None:
    url = f"{scheme}://user:{password}@host.example:6379/0?password={quote(password, safe='')}&db=1"
    shown = secrets.redact_url(url)
    assert password not in shown and "user:***@host.example:6379" in shown and "db=1" in shown
    for text in (shown, secrets.redact(f"error talking to {url}: refused")):
        assert password not in text and quote(password, safe="") not in text


def test_registered_secrets_are_masked_in_log_records_and_tracebacks() -> None:
    secret = "registered-Planted-0c0c"
    secrets.register(secret)
    captured = Captured()
    captured.addFilter(secrets.RedactingFilter())
    log = logging.getLogger("test.redaction")
    log.addHandler(captured)
    log.setLevel(logging.INFO)
    try:
        raise ValueError(f"bad {secret}")
    except ValueError:
        log.exception("while using %s", secret)
    assert captured.lines == ["while using ***"]
    assert secret not in json.dumps(captured.lines)
