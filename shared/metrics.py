"""Prometheus metrics of a worker, in a registry of its own, served on an HTTP endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ivmstream.health import Health, serve

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RuntimeMetrics:
    def __init__(self, service: str, runtime: str = "confluent-kafka") -> None:
        """``runtime``: what consumes the input (``confluent-kafka``, the default; ``faust``), exported
        as ``ivmstream_runtime_info{runtime=...}`` so dashboards can tell workers apart."""
        self.service = service
        self.runtime = runtime
        self.health = Health()  # the worker reports its phase; served as /healthz and /readyz
        self.registry = CollectorRegistry()
        r = self.registry
        Info("ivmstream_runtime", "The runtime consuming the input", ("service",), registry=r).labels(
            service
        ).info({"runtime": runtime})
        labels = ("service",)
        self.events_in = Counter("ivmstream_events_in", "Input records consumed", labels, registry=r).labels(
            service
        )
        self.events_applied = Counter(
            "ivmstream_events_applied", "Updates applied", labels, registry=r
        ).labels(service)
        self.events_out = Counter("ivmstream_results_out", "Results published", labels, registry=r).labels(
            service
        )
        self.events_rejected = Counter(
            "ivmstream_events_rejected",
            "Input records sent to the dead-letter topic",
            ("service", "reason"),
            registry=r,
        )
        self.batch_seconds = Histogram(
            "ivmstream_batch_seconds",
            "Time to decode, apply and publish one batch",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        ).labels(service)
        self.batch_size = Histogram(
            "ivmstream_batch_records",
            "Records per consumed batch",
            labels,
            buckets=(1, 10, 100, 500, 1000, 2000, 5000, 10000),
            registry=r,
        ).labels(service)
        self.consumer_lag = Gauge(
            "ivmstream_consumer_lag",
            "Records behind the partition's high watermark",
            ("service", "topic", "partition"),
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "ivmstream_checkpoint_seconds",
            "Time to flush outputs and atomically commit state+offsets",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        ).labels(service)
        self.checkpoint_bytes = Histogram(
            "ivmstream_checkpoint_bytes",
            "State bytes (snapshots and changed entries) written per checkpoint",
            labels,
            buckets=(0, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8),
            registry=r,
        ).labels(service)
        self.checkpoint_entries = Histogram(
            "ivmstream_checkpoint_entries",
            "State entries written (puts and deletes; a whole snapshot is one) per checkpoint",
            labels,
            buckets=(0, 1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7),
            registry=r,
        ).labels(service)
        self.state_bytes = Gauge(
            "ivmstream_state_bytes",
            "Stored state of the owned partitions, as the state backend estimates it",
            labels,
            registry=r,
        ).labels(service)
        self.checkpoints = Counter(
            "ivmstream_checkpoints", "Checkpoints committed", labels, registry=r
        ).labels(service)
        self.state_keys = Gauge(
            "ivmstream_state_keys",
            "Partition keys with state (resident or in the state store)",
            labels,
            registry=r,
        ).labels(service)
        self.redis_results_lost = Counter(
            "ivmstream_redis_results_lost",
            "Times Redis was found without the results this worker published (restarted empty, flushed); "
            "each time the current results were published again",
            labels,
            registry=r,
        ).labels(service)
        self.resident_engines = Gauge(
            "ivmstream_resident_engines",
            "Engines held in memory (at most resident_keys per partition after a checkpoint)",
            labels,
            registry=r,
        ).labels(service)
        self.assigned_partitions = Gauge(
            "ivmstream_assigned_partitions", "Input partitions owned by this worker", labels, registry=r
        ).labels(service)
        self.relation_events = Counter(
            "ivmstream_relation_events",
            "Valid input events per relation (0 for a declared relation nothing arrived for)",
            ("service", "relation"),
            registry=r,
        )
        self._relation_series: dict[str, Any] = {}  # relation -> its ivmstream_relation_events child
        self.engine_stat = Gauge(
            "ivmstream_engine_stat",
            "Engine-reported gauges summed over its keys",
            ("service", "stat"),
            registry=r,
        )

    def count_relations(self, counts: Mapping[str, int]) -> None:
        """Add a batch's events per relation; zero counts create the series (declared relations). Each
        relation's series is looked up once (``labels`` validates and locks on every call)."""
        series = self._relation_series
        for relation, n in counts.items():
            counter = series.get(relation)
            if counter is None:
                counter = series[relation] = self.relation_events.labels(self.service, relation)
            counter.inc(n)

    def reject(self, reason: str, n: int = 1) -> None:
        self.events_rejected.labels(self.service, reason).inc(n)

    def set_engine_stats(self, totals: Mapping[str, float]) -> None:
        for stat, value in totals.items():
            self.engine_stat.labels(self.service, stat).set(value)

    def export_reconcile(self, redis_client: Any, key: str) -> None:
        """Serve the latest Spark reconciliation verdict (written to Redis by ``ivmstream reconcile``)."""
        self.registry.register(_ReconcileCollector(self.service, redis_client, key))

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """``/metrics`` plus the probes ``/healthz`` and ``/readyz`` (shared/health.py) on one port."""
        serve(self.registry, self.health, port, addr)


class _ReconcileCollector(Collector):
    """Read at scrape time, so a verdict recorded by a batch job shows up without a pushgateway."""

    def __init__(self, service: str, redis_client: Any, key: str) -> None:
        self.service, self.redis, self.key = service, redis_client, key

    def collect(self):
        try:
            raw = self.redis.get(self.key)
        except Exception:  # a scrape must not fail because Redis is briefly away
            raw = None
        if raw is None:
            return
        verdict = orjson.loads(raw)
        for name, doc, value in (
            (
                "ivmstream_reconcile_ok",
                "1 if the last reconciliation matched, 0 if not",
                verdict["verdict"] == "match",
            ),
            (
                "ivmstream_reconcile_timestamp_seconds",
                "When the last reconciliation ran",
                verdict["checked_at"],
            ),
            (
                "ivmstream_reconcile_mismatched_keys",
                "Keys that differed in the last reconciliation",
                verdict["mismatched_keys"],
            ),
            ("ivmstream_reconcile_keys", "Keys checked by the last reconciliation", verdict["keys"]),
        ):
            family = GaugeMetricFamily(name, doc, labels=["service"])
            family.add_metric([self.service], float(value))
            yield family
