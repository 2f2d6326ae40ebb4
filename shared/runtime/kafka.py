"""confluent-kafka client settings and a reachability check that fails fast with one clear line.

Every client gets the security settings of the environment (IVMSTREAM_KAFKA_SECURITY_PROTOCOL, SASL and
TLS variables, shared/secrets.py) and then a config's ``kafka`` section; their secret values are
registered for redaction before any client exists, so no log line of librdkafka can show them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ivmstream.secrets import kafka_settings_from_env, redact, register_kafka_settings


class BrokerUnavailable(RuntimeError):
    pass


# librdkafka's own log lines go through Python logging, not straight to stderr.
KAFKA_LOG = logging.getLogger("ivmstream.kafka")


class BrokerWatch:
    """How long no Kafka broker has been reachable, from the clients' callbacks; ``check`` raises
    BrokerUnavailable once that passes ``timeout`` seconds (None: never).

    librdkafka retries an unreachable cluster forever and says so only in log lines; a worker that
    should give up (so its supervisor restarts or alerts) needs one decision point. The outage starts at
    librdkafka's "all brokers down" error and ends at the first statistics report that shows a broker
    up or the first record consumed; since both can lag a recovery, ``probe`` (a metadata request,
    true if answered) has the last word before giving up."""

    def __init__(self, bootstrap: str, timeout: float | None, probe: Callable[[], bool]) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.probe = probe
        self.down_since: float | None = None

    def on_error(self, err: KafkaError) -> None:
        """The clients' ``error_cb``: errors there are about a client, not one record."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            if self.down_since is None:
                self.down_since = time.monotonic()
                KAFKA_LOG.warning("no Kafka broker reachable at %s; retrying", self.bootstrap)
        else:  # a fatal one also fails the next consume, which stops the worker
            KAFKA_LOG.log(
                logging.ERROR if err.fatal() else logging.DEBUG, "kafka client error: %s", err.str()
            )

    def on_stats(self, stats: Mapping[str, Any]) -> None:
        if any(b.get("state") == "UP" for b in stats.get("brokers", {}).values()):
            self.reachable()

    def reachable(self) -> None:
        if self.down_since is not None:
            KAFKA_LOG.warning("Kafka reachable again after %.1f s", time.monotonic() - self.down_since)
            self.down_since = None

    def check(self) -> None:
        if self.down_since is None or self.timeout is None:
            return
        down = time.monotonic() - self.down_since
        if down <= self.timeout:
            return
        if self.probe():
            self.reachable()
            return
        raise self.unavailable(time.monotonic() - self.down_since)

    def unavailable(self, down: float) -> BrokerUnavailable:
        """The error a worker stops with after ``down`` seconds without an answer from Kafka."""
        return BrokerUnavailable(
            f"no Kafka broker reachable at {redact(self.bootstrap)} for {down:.0f} s (broker_timeout "
            f"{self.timeout:g} s); exiting with the state at its last checkpoint, so a restart "
            "resumes exactly"
        )


def consumer_settings(
    bootstrap: str, group: str, session_timeout_ms: int, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Offsets come from the state store, so auto-commit is off; a new view reads from the start of
    the log (positioned explicitly on assignment) because it needs the whole history."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Positions always come from the state store (or the start of the log for a new view); an
        # out-of-range position means history was deleted under us, which must stop the worker, not skip.
        "auto.offset.reset": "error",
        "isolation.level": "read_committed",
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": max(100, session_timeout_ms // 5),
        "partition.assignment.strategy": "range",
        "statistics.interval.ms": 2000,
        "fetch.wait.max.ms": 100,
        # librdkafka pauses fetching for 1 s when its prefetch queue fills; a view should not idle.
        "fetch.queue.backoff.ms": 10,
        "logger": KAFKA_LOG,
    }
    return _with_security(conf, overrides)


def producer_settings(bootstrap: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        # Java-compatible key hashing; the empty key is hashed too, so keyless results keep one order.
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 1000000,
        "logger": KAFKA_LOG,
    }
    return _with_security(conf, overrides)


def client_security(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings every client gets beyond its own (the environment's security settings, then
    ``overrides``): for clients built elsewhere, such as the dead-letter readers and Spark's Kafka source."""
    return _with_security({}, overrides)


def _with_security(conf: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``conf`` with the environment's security settings, then ``overrides`` (a config's ``kafka``
    section for this kind of client), on top."""
    conf.update(kafka_settings_from_env())
    if overrides:
        register_kafka_settings(overrides)
        conf.update(overrides)
    return conf


def check_reachable(bootstrap: str, timeout: float = 5.0, overrides: Mapping[str, Any] | None = None) -> None:
    """Ask the cluster for metadata so an unreachable broker is an error now, not a silent retry loop."""
    # log_level 0: the probe's failure is reported once, below, not as a stream of librdkafka lines.
    conf = _with_security({"bootstrap.servers": bootstrap, "log_level": 0}, overrides)
    try:
        AdminClient(conf).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnavailable(f"cannot reach Kafka at {bootstrap}: {exc.args[0].str()}") from None


def partition_count(
    bootstrap: str, topic: str, timeout: float = 10.0, overrides: Mapping[str, Any] | None = None
) -> int | None:
    """How many partitions ``topic`` has (None: no such topic). Asks for every topic's metadata, so a
    broker that creates topics on demand does not create this one."""
    conf = _with_security({"bootstrap.servers": bootstrap, "log_level": 0}, overrides)
    try:
        meta = AdminClient(conf).list_topics(timeout=timeout).topics.get(topic)
    except KafkaException as exc:
        raise BrokerUnavailable(f"cannot reach Kafka at {bootstrap}: {exc.args[0].str()}") from None
    if meta is None or meta.error is not None:
        return None
    return len(meta.partitions)
