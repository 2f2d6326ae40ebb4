"""Faust's own sensors on the worker's /metrics, read when scraped.

Faust always runs its ``Monitor`` sensor, which counts messages, events, sends, commits, rebalances
and offsets in plain attributes. Faust's ``PrometheusMonitor`` instead updates Prometheus metrics on
every message and event (label lookups, a topic-name regex), which costs more per event than
ivmstream's whole apply of the reference service; reading the ``Monitor``'s attributes at scrape time
exports the same figures at no cost per event. Names are prefixed ``faust_``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import faust
from faust.sensors.monitor import Monitor
from faust.web import Request, Response, View
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


def _mean(values: Iterable[float]) -> float:
    seq = list(values)
    return sum(seq) / len(seq) if seq else 0.0


class FaustMonitorCollector(Collector):
    """The app's ``Monitor`` as Prometheus metrics, built at each scrape."""

    def __init__(self, app: faust.App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        monitor = self.app.monitor
        if not isinstance(monitor, Monitor):
            return
        yield _counter("messages_received", "Messages received", monitor.messages_received_total)
        yield _by(
            "messages_received_per_topic",
            "Messages received per topic",
            "topic",
            monitor.messages_received_by_topic,
        )
        yield _gauge("active_messages", "Messages being processed", monitor.messages_active)
        yield _counter("events", "Stream events received", monitor.events_total)
        yield _gauge("active_events", "Stream events being processed", monitor.events_active)
        yield _by("events_per_stream", "Events per stream", "stream", monitor._events_by_stream_dict())
        yield _gauge(
            "events_runtime_avg_seconds",
            "Mean time an event took (recent events)",
            monitor.events_runtime_avg,
        )
        yield _counter("messages_sent", "Messages sent", monitor.messages_sent)
        yield _by(
            "messages_sent_per_topic", "Messages sent per topic", "topic", monitor.messages_sent_by_topic
        )
        yield _counter("send_errors", "Messages whose send failed", monitor.send_errors)
        yield _gauge(
            "send_latency_avg_seconds", "Mean send latency (recent sends)", _mean(monitor.send_latency)
        )
        yield _gauge(
            "commit_latency_avg_seconds",
            "Mean commit latency (recent commits)",
            _mean(monitor.commit_latency),
        )
        yield _counter(
            "assignments_completed", "Partition assignments completed", monitor.assignments_completed
        )
        yield _counter("assignments_failed", "Partition assignments failed", monitor.assignments_failed)
        yield _counter("rebalances", "Rebalances seen", monitor.rebalances)
        yield _gauge("rebalance_end_avg_seconds", "Mean rebalance time (recent)", monitor.rebalance_end_avg)
        yield _by(
            "topic_buffer_full",
            "Times a partition's stream buffer was full",
            "topic",
            monitor._topic_buffer_full_dict(),
        )
        for name, doc, offsets in (
            ("partition_committed_offset", "Offset Faust committed", monitor.tp_committed_offsets),
            ("partition_read_offset", "Offset Faust read", monitor.tp_read_offsets),
            ("partition_end_offset", "End offset (high watermark) seen", monitor.tp_end_offsets),
        ):
            family = GaugeMetricFamily(f"faust_{name}", doc, labels=("topic", "partition"))
            for tp, offset in dict(offsets).items():
                family.add_metric((tp.topic, str(tp.partition)), offset)
            yield family


def _counter(name: str, doc: str, value: float) -> Metric:
    return CounterMetricFamily(f"faust_{name}", doc, value=value)


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(f"faust_{name}", doc, value=value)


def _by(name: str, doc: str, label: str, counts: Mapping[Any, int]) -> Metric:
    family = CounterMetricFamily(f"faust_{name}", doc, labels=(label,))
    for key, count in dict(counts).items():
        family.add_metric((str(key),), count)
    return family


def export_faust_metrics(
    app: faust.App, registry: CollectorRegistry, page: str | None = "/faust/metrics"
) -> None:
    """Faust's sensors in ``registry`` (the worker's /metrics); ``page``: also on the app's web server."""
    registry.register(FaustMonitorCollector(app))
    if page is None:
        return

    class Metrics(View):
        async def get(self, request: Request) -> Response:
            return self.bytes(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)

    app.page(page, name="ivmstream-faust-metrics")(Metrics)
