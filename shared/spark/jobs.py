"""The Spark bootstrap and reconcile frameworks every service plugs its batch side into.

A service declares ``BatchJobs``: ``build_state`` turns net bags (snapshot DataFrames) into its
engines' snapshots per partition key, and ``recompute`` evaluates its query with Spark SQL /
DataFrames, independently of the engine. The framework does the rest:

- bootstrap: read the snapshot, build the states, place each key in the partition its producers use,
  and write every partition's states with the input offset to resume from, in the runtime's own
  atomic checkpoint format, so ``ivmstream run`` continues from there;
- reconcile: read the published results and the offsets they reflect, rebuild the bags from the
  snapshot plus exactly the log records each key's result covers (minus what the stream dead-lettered),
  recompute, compare, report, and record the verdict where the workers' metrics endpoints export it.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivmstream.compare import diff
from ivmstream.config import ConfigError, ServiceConfig, schema_of
from ivmstream.engine import is_incremental
from ivmstream.events import Schema
from ivmstream.partitioner import partition_for
from ivmstream.runtime.dlq import latest_results, read_dead_letters
from ivmstream.runtime.kafka import client_security
from ivmstream.runtime.output import result_index, result_key
from ivmstream.service import ServiceDefinition
from ivmstream.spark.decode import KEY, MULT, decode_log, events_by_relation, net_bags
from ivmstream.spark.kafka_source import read_kafka, resolve_offsets
from ivmstream.spark.snapshot import read_snapshot
from ivmstream.state import StateChanges, StateStore, envelope_for
from ivmstream.verdict import reconcile_key


@dataclass(frozen=True)
class BatchJobs:
    build_state: Callable[
        [SparkSession, Mapping[str, DataFrame], Mapping[str, Any]], Iterable[tuple[str, bytes]]
    ]
    recompute: Callable[[SparkSession, Mapping[str, DataFrame], Mapping[str, Any]], Mapping[str, Any]]
    # Projects a published result onto what ``recompute`` produces (e.g. drops engine diagnostics).
    comparable: Callable[[Any], Any] = lambda result: result
    # The result of a key whose bags are empty (all its tuples deleted); None: such a key is a mismatch.
    empty: Callable[[Mapping[str, Any]], Any] | None = None
    # The engine holds its relations as sets (a repeated insert is refused): reconcile reads a snapshot
    # tuple with a positive net multiplicity as present once, as bootstrap does, before the log's events.
    snapshot_as_set: bool = False


class BatchError(RuntimeError):
    pass


def _as_set(rows: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Each tuple with a positive net multiplicity once (multiplicity 1); the others dropped."""
    netted = rows.groupBy(KEY, *columns).agg(F.sum(MULT).alias(MULT))
    return netted.where(F.col(MULT) > 0).withColumn(MULT, F.lit(1).cast(netted.schema[MULT].dataType))


def load_jobs(service: ServiceDefinition) -> BatchJobs:
    if service.batch is None:
        raise ConfigError(f"service {service.name} has no Spark jobs")
    module, attr = service.batch.split(":", 1)
    return getattr(importlib.import_module(module), attr)


# --- offsets ------------------------------------------------------------------------------------------


def kafka_settings(config: ServiceConfig) -> dict[str, str]:
    """The librdkafka settings the worker's consumer gets beyond its own (the environment's security
    settings, then the config's ``kafka.consumer`` section), as strings: the jobs' Kafka readers get
    them too, the Spark source as ``kafka.*`` options."""
    return {
        k: str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in client_security(config.kafka.get("consumer", {})).items()
    }


def topic_offsets(
    bootstrap: str, topic: str, spec: str, kafka: Mapping[str, str] | None = None
) -> dict[int, int]:
    """``earliest``, ``latest`` or ``P:O,P:O,...`` (unnamed partitions: earliest) per partition.

    Unlike the Spark source, which clamps, an explicit offset outside a partition's range is an error:
    resuming or reconciling from the wrong place must not pass silently."""
    try:
        marks = resolve_offsets(bootstrap, topic, "earliest", "latest", conf=kafka)
    except ValueError as exc:  # a setting librdkafka refuses (the message names it, secrets masked)
        raise BatchError(str(exc)) from None
    if spec == "earliest":
        return {p: lo for p, (lo, _hi) in marks.items()}
    if spec == "latest":
        return {p: hi for p, (_lo, hi) in marks.items()}
    out = {p: lo for p, (lo, _hi) in marks.items()}
    for part in spec.split(","):
        try:
            p_s, o_s = part.split(":")
            p, o = int(p_s), int(o_s)
        except ValueError:
            raise BatchError(f"bad offsets {spec!r}: expected earliest, latest or P:O,P:O,...") from None
        if p not in marks:
            raise BatchError(f"topic {topic} has no partition {p}")
        lo, hi = marks[p]
        if not lo <= o <= hi:
            raise BatchError(f"offset {o} is outside partition {p}'s range [{lo}, {hi}]")
        out[p] = o
    return out


# --- bootstrap ----------------------------------------------------------------------------------------


@dataclass
class BootstrapReport:
    keys: int
    partitions: dict[int, int]  # partition -> offset the service resumes from
    bytes_written: int
    seconds: float
    inputs: dict[str, int] = field(default_factory=dict)  # a view over inputs: "topic:partition" -> offset


def refuse_sharded(config: ServiceConfig) -> None:
    """Both jobs work on ``key_field`` instances, one engine per key in one partition's state. A sharded
    query (``shard_by``) spreads one instance over every input partition plus a broadcast topic and
    publishes through a coordinator; neither job places nor reads that layout, so they refuse it
    rather than write state the workers would misread."""
    if config.sharded:
        raise BatchError(
            f"{config.source}: bootstrap and reconcile do not support a sharded query "
            f"(shard_by {config.shard_by!r}); start sharded workers from the log, and check their "
            "result against `ivmstream replay` of the same input"
        )


def bootstrap_topic(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    snapshot: str | None,
    store: StateStore,
    *,
    bootstrap_servers: str | None = None,
    from_offsets: str = "latest",
    partitions: int = 1,
) -> BootstrapReport:
    """Write the snapshot's engine states and the resume offsets, as one checkpoint per partition, for a
    view over one input topic (``ivmstream.spark.runs.run_bootstrap`` chooses between this and a view
    over ``inputs``)."""
    if snapshot is None:
        raise BatchError("bootstrap needs a snapshot (only a view over inputs reads its topics instead)")
    started = time.monotonic()
    jobs = load_jobs(service)
    schema = schema_of(service, config)
    topic = config.input_topic
    if bootstrap_servers:
        offsets = topic_offsets(bootstrap_servers, topic, from_offsets, kafka_settings(config))
    else:  # no broker to ask: a fresh topic, read from its beginning
        offsets = dict.fromkeys(range(partitions), 0)
    for p in offsets:
        existing = store.load(topic, p)
        if not existing.empty:
            raise BatchError(
                f"state for {topic}:{p} already exists (offset {existing.offset}); "
                "bootstrap only into an empty state store"
            )
    bags = net_bags({n: [df] for n, df in read_snapshot(spark, snapshot, schema).items()}, schema)
    n = len(offsets)
    keyed = schema.key_field is not None
    per_partition, keys = place_states(
        spark, jobs, bags, service, config, offsets, lambda key: partition_for(key, n) if keyed else 0
    )
    size = commit_states(store, topic, per_partition, offsets, service, config)
    store.close()
    return BootstrapReport(keys, offsets, size, time.monotonic() - started)


def place_states(
    spark: SparkSession,
    jobs: BatchJobs,
    bags: Mapping[str, DataFrame],
    service: ServiceDefinition,
    config: ServiceConfig,
    partitions: Iterable[int],
    partition_of: Callable[[str], int],
) -> tuple[dict[int, StateChanges], int]:
    """Each key's state the batch job builds from ``bags``, in its partition's changes (``partition_of``
    the key) as the workers keep it; and the number of keys."""
    per_partition = {p: StateChanges() for p in partitions}
    keys = 0
    for key, state in jobs.build_state(spark, bags, config.options):
        changes = per_partition[partition_of(key)]
        _place(changes, key, state, lambda: service.engine(config.options), config.state_layout)
        keys += 1
    return per_partition, keys


def commit_states(
    store: StateStore,
    topic: str,
    per_partition: Mapping[int, StateChanges],
    offsets: Mapping[int, int],
    service: ServiceDefinition,
    config: ServiceConfig,
) -> int:
    """Each partition's changes as one checkpoint at the offset its workers resume from; bytes written."""
    envelope = envelope_for(service, config.options, config.state_layout).to_bytes()
    return sum(store.commit(topic, p, offsets[p], c, envelope).bytes for p, c in per_partition.items())


def _place(changes: StateChanges, key: str, state: bytes, new_engine: Callable[[], Any], layout: str) -> None:
    """A built state in the layout the workers keep: entries for incremental engines, else the snapshot."""
    engine = new_engine()
    if layout != "incremental" or not is_incremental(engine):
        changes.snapshots[key] = state
        return
    engine.restore(state)
    changes.entries[key] = list(engine.all_entries())


# --- reconcile ----------------------------------------------------------------------------------------


@dataclass
class ReconcileReport:
    service: str
    output_topic: str
    verdict: str  # "match" | "mismatch" | "nothing-published"
    keys: int
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> end offset checked
    engine_refused: int = 0  # valid events the stream dead-lettered (its engine refused them)
    undecodable: int = 0
    checked_at: float = 0.0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        if self.verdict == "nothing-published":
            return f"reconcile {self.service}: nothing published yet on {self.output_topic}"
        head = (
            f"reconcile {self.service}: {self.verdict.upper()} on {self.keys} key(s) at offsets "
            + ", ".join(f"{tp}={o}" for tp, o in sorted(self.offsets.items()))
        )
        if self.mismatches:
            first_key = sorted(self.mismatches)[0]
            head += (
                f"; {len(self.mismatches)} key(s) differ, e.g. [{first_key}] {self.mismatches[first_key][0]}"
            )
        return head + f" ({self.seconds:.1f}s)"


def published_results(redis_client: Any, output_topic: str) -> dict[str, dict[str, Any]]:
    keys = sorted(k.decode() for k in redis_client.smembers(result_index(output_topic)))
    raw = redis_client.mget([result_key(output_topic, k) for k in keys]) if keys else []
    return {k: orjson.loads(v) for k, v in zip(keys, raw, strict=True) if v is not None}


def read_published(
    redis_client: Any, bootstrap_servers: str, output_topic: str, kafka: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Each key's latest published record: from Redis when given, else from the results topic."""
    if redis_client is not None:
        return published_results(redis_client, output_topic)
    return latest_results(bootstrap_servers, output_topic, kafka=kafka)


def result_differences(
    jobs: BatchJobs, expected: Mapping[str, Any], key: str, result: Any, options: Mapping[str, Any]
) -> list[str]:
    """How a key's published result differs from the recomputation; a key the recomputation has no rows
    for compares with the service's empty result, and is a mismatch where the service declares none."""
    if key in expected:
        return diff(expected[key], jobs.comparable(result))
    if jobs.empty is not None:
        return diff(jobs.empty(options), jobs.comparable(result))
    return ["no rows in the recomputation for this key"]


@dataclass
class Reconciliation:
    """What every reconcile reads first (the service's jobs, the view's schema, the published records)
    and how each ends (the query recomputed from the bags, compared with each published result)."""

    config: ServiceConfig
    jobs: BatchJobs
    schema: Schema
    kafka: dict[str, str]
    published: dict[str, dict[str, Any]]
    report: ReconcileReport
    started: float

    @classmethod
    def begin(
        cls, service: ServiceDefinition, config: ServiceConfig, bootstrap_servers: str, redis_client: Any
    ) -> Reconciliation:
        started = time.monotonic()
        kafka = kafka_settings(config)
        return cls(
            config,
            load_jobs(service),
            schema_of(service, config),
            kafka,
            read_published(redis_client, bootstrap_servers, config.output_topic, kafka),
            ReconcileReport(
                service.name, config.output_topic, "nothing-published", 0, checked_at=time.time()
            ),
            started,
        )

    def empty_parts(self) -> dict[str, list[DataFrame]]:
        """One list of frames per relation, for the rows the published results reflect."""
        return {name: [] for name in self.schema.relations}

    def finish(
        self, spark: SparkSession, parts: Mapping[str, list[DataFrame]], results: Mapping[str, Any]
    ) -> ReconcileReport:
        """The report once the query, recomputed from ``parts``' net bags, is compared with each key's
        published result in ``results``."""
        options = self.config.options
        expected = self.jobs.recompute(spark, net_bags(parts, self.schema), options)
        report = self.report
        report.keys = len(results)
        for key, result in results.items():
            differences = result_differences(self.jobs, expected, key, result, options)
            if differences:
                report.mismatches[key] = differences
        report.verdict = "mismatch" if report.mismatches else "match"
        report.seconds = time.monotonic() - self.started
        return report


def _engine_refused(
    spark: SparkSession, bootstrap: str, dlq_topic: str, input_topic: str, kafka: Mapping[str, str]
) -> DataFrame | None:
    """(partition, offset) of input records the stream refused; they are not part of its view."""
    dead = read_dead_letters(bootstrap, dlq_topic, kafka=kafka)
    refused = {(d.partition, d.offset) for d in dead if d.topic == input_topic}
    if not refused:
        return None
    return spark.createDataFrame(sorted(refused), "partition int, offset long")


def reconcile_topic(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap_servers: str,
    redis_client: Any,
    *,
    snapshot: str | None = None,
    from_offsets: str = "earliest",
) -> ReconcileReport:
    """Recompute every published key's result at exactly the offsets it reflects, and compare, for a view
    over one input topic (``ivmstream.spark.runs.run_reconcile`` chooses between this and a view over
    ``inputs``)."""
    run = Reconciliation.begin(service, config, bootstrap_servers, redis_client)
    jobs, schema, kafka, published, report = run.jobs, run.schema, run.kafka, run.published, run.report
    topic = config.input_topic
    if not published:
        return report
    # Each key's result covers its partition's records before its offset; read up to the largest.
    key_ends: list[tuple[str, int, int]] = []
    for key, rec in published.items():
        [(tp, end)] = rec["offsets"].items()
        t, p = tp.rsplit(":", 1)
        if t != topic:
            raise BatchError(f"result for key {key!r} reflects topic {t}, but the config reads {topic}")
        key_ends.append((key, int(p), int(end)))
    starts = topic_offsets(bootstrap_servers, topic, from_offsets, kafka)
    ends = {p: max((e for _k, pp, e in key_ends if pp == p), default=starts[p]) for p in starts}
    report.offsets = {f"{topic}:{p}": e for p, e in sorted(ends.items())}
    parts = run.empty_parts()
    if snapshot is not None:
        for name, df in read_snapshot(spark, snapshot, schema).items():
            parts[name].append(
                _as_set(df, schema.relations[name].column_names) if jobs.snapshot_as_set else df
            )
    log = read_kafka(
        spark,
        bootstrap_servers,
        topic,
        starting=orjson.dumps({str(p): o for p, o in starts.items()}).decode(),
        ending=orjson.dumps({str(p): o for p, o in ends.items()}).decode(),
        options={f"kafka.{k}": v for k, v in kafka.items()},
    )
    decoded = decode_log(log, schema).cache()
    report.undecodable = decoded.where(F.col("error").isNotNull()).count()
    dead = _engine_refused(spark, bootstrap_servers, config.dlq_topic, topic, kafka)
    covered = spark.createDataFrame(key_ends, f"{KEY} string, _p int, _end long")
    for name, events in events_by_relation(decoded, schema).items():
        if dead is not None:
            report.engine_refused += events.join(dead, ["partition", "offset"], "inner").count()
            events = events.join(dead, ["partition", "offset"], "left_anti")
        events = events.join(covered, KEY).where(
            (F.col("partition") == F.col("_p")) & (F.col("offset") < F.col("_end"))
        )
        parts[name].append(events.select(KEY, *schema.relations[name].column_names, MULT))
    run.finish(spark, parts, {key: rec["result"] for key, rec in published.items()})
    decoded.unpersist()
    return report


def record_verdict(redis_client: Any, report: ReconcileReport) -> None:
    """Where workers' /metrics endpoints pick the outcome up (no pushgateway needed)."""
    redis_client.set(
        reconcile_key(report.output_topic),
        orjson.dumps(
            {
                "verdict": report.verdict,
                "checked_at": report.checked_at,
                "keys": report.keys,
                "mismatched_keys": len(report.mismatches),
            }
        ),
    )
