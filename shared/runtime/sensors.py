"""A worker's Prometheus metrics, kept from its hooks (``ivmstream.runtime.hooks``): the worker itself
only reports what happened."""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping

import orjson

from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.hooks import BatchApplied, CheckpointWritten, Hooks, PartitionsChanged, RecordsRefused
from ivmstream.runtime.kafka import BrokerWatch
from ivmstream.runtime.partition import PartitionState
from ivmstream.state import StateStore


class MetricsSensor:
    """Counters per batch, checkpoint and refusal; gauges of the owned partitions after each checkpoint
    and rebalance (``partitions``: the worker's own map, read when they change)."""

    def __init__(
        self,
        metrics: RuntimeMetrics,
        store: StateStore,
        partitions: Mapping[int, PartitionState],
        size_probe_every: float = 30.0,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.partitions = partitions
        self.size_probe_every = size_probe_every
        self._last_size_probe = 0.0

    def attach(self, hooks: Hooks) -> None:
        hooks.batch_applied.append(self.batch_applied)
        hooks.checkpoint_written.append(self.checkpoint_written)
        hooks.records_refused.append(self.records_refused)
        hooks.partitions_assigned.append(self.partitions_changed)
        hooks.partitions_revoked.append(self.partitions_changed)

    def batch_applied(self, batch: BatchApplied) -> None:
        m = self.metrics
        m.events_in.inc(batch.records)
        m.events_applied.inc(batch.applied)
        m.events_out.inc(batch.published)
        if not batch.broadcast:
            m.batch_size.observe(batch.records)
        m.batch_seconds.observe(batch.seconds)

    def checkpoint_written(self, cp: CheckpointWritten) -> None:
        if not cp.partitions:
            return
        m = self.metrics
        m.checkpoints.inc()
        m.checkpoint_bytes.observe(cp.bytes)
        m.checkpoint_entries.observe(cp.entries)
        m.checkpoint_seconds.observe(cp.seconds)
        self.update_gauges()
        self._probe_state_size()

    def records_refused(self, refused: RecordsRefused) -> None:
        for code, n in refused.counts.items():
            self.metrics.reject(code, n)

    def partitions_changed(self, _change: PartitionsChanged) -> None:
        self.update_gauges()

    def stats_callback(self, watch: BrokerWatch) -> Callable[[str], None]:
        """The consumer's ``stats_cb``: broker reachability for ``watch``, and each owned partition's lag."""
        metrics, partitions = self.metrics, self.partitions

        def on_stats(stats_json: str) -> None:
            stats = orjson.loads(stats_json)
            watch.on_stats(stats)
            for topic, tstats in stats.get("topics", {}).items():
                for pid, pstats in tstats.get("partitions", {}).items():
                    lag = pstats.get("consumer_lag", -1)
                    if pid != "-1" and lag >= 0 and int(pid) in partitions:
                        metrics.consumer_lag.labels(metrics.service, topic, pid).set(lag)

        return on_stats

    def update_gauges(self) -> None:
        m, owned = self.metrics, self.partitions.values()
        m.assigned_partitions.set(len(owned))
        m.state_keys.set(sum(p.key_count for p in owned))
        m.resident_engines.set(sum(len(p.engines) for p in owned))
        totals: dict[str, float] = defaultdict(float)
        for p in owned:
            for engine in p.engines.values():
                stats = getattr(engine, "stats", None)
                if stats is not None:
                    for name, value in stats().items():
                        totals[name] += value
        m.set_engine_stats(totals)

    def _probe_state_size(self) -> None:
        """``ivmstream_state_bytes`` from the backend's own estimate, at most every ``size_probe_every`` s."""
        now = time.monotonic()
        if now - self._last_size_probe < self.size_probe_every:
            return
        self._last_size_probe = now
        sizes = [self.store.size_bytes(p.topic, p.partition) for p in self.partitions.values()]
        if all(s is not None for s in sizes):
            self.metrics.state_bytes.set(sum(s for s in sizes if s is not None))


class RefusalLog:
    """Refused records in the worker's log: how many per reason, at most one line per ``every`` seconds
    (the first refusal at once), so a flood of bad input costs a line, not a line per record. The dead
    letters themselves say which records and why (``ivmstream dlq``)."""

    def __init__(
        self,
        service: str,
        dlq_topic: str,
        every: float = 10.0,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service, self.dlq_topic, self.every = service, dlq_topic, every
        self.log = log or logging.getLogger("ivmstream.runtime")
        self.clock = clock
        self.pending: Counter[str] = Counter()
        self.total = 0
        self._last = -math.inf

    def attach(self, hooks: Hooks) -> None:
        hooks.records_refused.append(self.records_refused)
        hooks.batch_applied.append(self.batch_applied)  # writes what waited once the interval is over

    def records_refused(self, refused: RecordsRefused) -> None:
        self.pending.update(refused.counts)
        self.flush()

    def batch_applied(self, _batch: BatchApplied) -> None:
        if self.pending:
            self.flush()

    def flush(self, force: bool = False) -> None:
        """Log the counts gathered since the last line, if ``every`` seconds have passed (or ``force``)."""
        now = self.clock()
        if not self.pending or (not force and now - self._last < self.every):
            return
        n = sum(self.pending.values())
        self.total += n
        reasons = ", ".join(f"{code} {count}" for code, count in self.pending.most_common())
        self.log.warning(
            "%s: %d records refused (%s), %d since start; dead letters in %s (ivmstream dlq %s)",
            self.service,
            n,
            reasons,
            self.total,
            self.dlq_topic,
            self.service,
        )
        self.pending.clear()
        self._last = now
