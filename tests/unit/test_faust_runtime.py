"""The Faust runtime's app as the default runtime's worker: the same Kafka security settings (secrets
registered for redaction), the same isolation level and fetch wait, and Faust's sensors on the
worker's /metrics, read when scraped. No broker: nothing here starts the app."""

from __future__ import annotations

from pathlib import Path

import pytest
from faust.sensors.monitor import Monitor
from faust.sensors.prometheus import PrometheusMonitor
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ivmstream.config import ConfigError, build_config
from ivmstream.faust.kafka import FETCH_WAIT_MS, RuntimeTransport, broker_credentials
from ivmstream.faust.runtime import faust_app, faust_worker
from ivmstream.faust.sensors import export_faust_metrics
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.kafka import consumer_settings
from ivmstream.secrets import redact
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

BOOTSTRAP = "127.0.0.1:1"  # never connected to


def config(**extra: object):  # type: ignore[no-untyped-def]
    return build_config(load_service("reference"), {"key_field": "store", **extra})


def test_the_consumer_waits_and_isolates_as_the_default_runtimes() -> None:
    app = faust_app("g", BOOTSTRAP, config(), None)
    assert isinstance(app.transport, RuntimeTransport)
    assert consumer_settings(BOOTSTRAP, "g", 10000)["fetch.wait.max.ms"] == FETCH_WAIT_MS
    assert consumer_settings(BOOTSTRAP, "g", 10000)["isolation.level"] == "read_committed"


def test_sasl_settings_from_the_environment_reach_faust(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret-from-a-file\n")
    monkeypatch.setenv("IVMSTREAM_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("IVMSTREAM_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("IVMSTREAM_KAFKA_SASL_USERNAME", "view")
    monkeypatch.setenv("IVMSTREAM_KAFKA_SASL_PASSWORD_FILE", str(secret))
    credentials = faust_app("g", BOOTSTRAP, config(), None).conf.broker_credentials
    assert credentials.username == "view" and credentials.password == "s3cret-from-a-file"
    assert credentials.mechanism.value == "SCRAM-SHA-512" and credentials.protocol.value == "SASL_PLAINTEXT"
    assert redact("login s3cret-from-a-file") == "login ***"


def test_a_configs_kafka_consumer_section_reaches_faust() -> None:
    kafka = {
        "consumer": {"security.protocol": "sasl_plaintext", "sasl.username": "u", "sasl.password": "pw-1234"}
    }
    credentials = faust_app("g", BOOTSTRAP, config(kafka=kafka), None).conf.broker_credentials
    assert (credentials.username, credentials.password, credentials.mechanism.value) == (
        "u",
        "pw-1234",
        "PLAIN",
    )


def test_plaintext_has_no_credentials_and_unsupported_settings_are_refused() -> None:
    assert broker_credentials({}) is None
    assert broker_credentials({"security.protocol": "plaintext"}) is None
    with pytest.raises(ConfigError, match=r"sasl\.mechanisms GSSAPI"):
        broker_credentials({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI"})
    with pytest.raises(ConfigError, match=r"security\.protocol bogus"):
        broker_credentials({"security.protocol": "bogus"})


def test_fausts_sensors_are_read_at_scrape_time() -> None:
    """No PrometheusMonitor (it updates Prometheus on every event); Faust's Monitor, exported."""
    metrics = RuntimeMetrics("reference", runtime="faust")
    view = faust_worker(
        load_service("reference"), config(), BOOTSTRAP, MemoryStore(), group="g", metrics=metrics
    )
    monitor = view.app.monitor
    assert isinstance(monitor, Monitor) and not isinstance(monitor, PrometheusMonitor)
    monitor.messages_received_total = 7
    monitor.events_total = 5
    monitor.messages_received_by_topic["in"] += 7
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
    }
    assert samples[("faust_messages_received_total", ())] == 7
    assert samples[("faust_events_total", ())] == 5
    assert samples[("faust_messages_received_per_topic_total", (("topic", "in"),))] == 7
    assert samples[("ivmstream_runtime_info", (("runtime", "faust"), ("service", "reference")))] == 1
    view.metadata.close()


def test_the_collector_exports_a_fresh_apps_monitor() -> None:
    import faust

    app = faust.App("fresh", broker=f"kafka://{BOOTSTRAP}")
    registry = CollectorRegistry()
    export_faust_metrics(app, registry, page=None)
    text = generate_latest(registry).decode()
    assert "faust_messages_received_total 0.0" in text and "faust_rebalances_total 0.0" in text


def test_refusals_and_silent_relations_are_logged_as_on_the_default_runtime(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from types import SimpleNamespace

    from ivmstream.runtime.hooks import RecordsRefused, fire

    view = faust_worker(
        load_service("reference"),
        config(),
        BOOTSTRAP,
        MemoryStore(),
        group="g",
        metrics=RuntimeMetrics("reference", runtime="faust"),
        silent_relation_after=2,
    )
    with caplog.at_level("WARNING"):
        fire(view.hooks.records_refused, RecordsRefused("in", 0, {"malformed-json": 3}))
        # records of a partition this worker does not own: counted as input, applied nowhere
        view.process([SimpleNamespace(partition=9, offset=i, key=b"", value=b"{}") for i in range(2)])
    text = caplog.text
    assert "malformed-json 3" in text
    assert "relation items received no event in the first 2 input records" in text
    view.metadata.close()


def test_emit_checkpoint_holds_results_for_the_faust_checkpointer_too() -> None:
    from ivmstream.runtime.apply import AtCheckpoint

    view = faust_worker(
        load_service("reference"),
        config(emit="checkpoint"),
        BOOTSTRAP,
        MemoryStore(),
        group="g",
        metrics=RuntimeMetrics("reference", runtime="faust"),
    )
    assert isinstance(view.mode, AtCheckpoint)
    assert view.checkpointer.publish_pending == view.mode.publish_pending  # before each checkpoint's flush
    view.metadata.close()
