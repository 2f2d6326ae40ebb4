"""Bootstrap and reconcile for a keyless view over ``inputs`` (native and change topics), in Spark.

The view is one engine over every partition of every input (``ivmstream.runtime.merged``), stored as
partition 0 of ``<service>.inputs`` with the next offset of each input partition, the inputs as
configured and the last images of its upsert-mode inputs. Bootstrap writes exactly that:

- the snapshot (tables, native events, or change files such as ``orders.debezium.jsonl``), then every
  input topic from its beginning to its current end (``--from-offsets latest``, with ``--bootstrap``),
  decoded in each partition's order by the stream's codecs (``ivmstream.spark.changes``);
- the engine state the service's batch job builds from the net bags, the end offsets to resume from,
  and the images the decoding kept (a change file's images go to the upsert-mode input of its relation).

Reconcile reads the one published result and the offsets of every input partition it reflects, decodes
each input from ``--from-offsets`` (default its beginning) up to them, without the records the stream
dead-lettered (decoder or engine refusals: neither changed the view or the images), recomputes the query
with the service's Spark SQL and compares.

A keyed view over inputs (re-keyed by ``ivmstream rekey``) is refused by both: its workers' state is
spread by ``key_field`` over the re-keyed topic and its copies are told apart by origin tags the Spark
Kafka source does not read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ivmstream.config import ServiceConfig, schema_of
from ivmstream.events import Schema
from ivmstream.events.encoding import json_bytes
from ivmstream.runtime.apply import KEYLESS
from ivmstream.runtime.dlq import read_dead_letters
from ivmstream.runtime.merged import IMAGES_KEY, INPUTS_KEY, slot_topic
from ivmstream.service import ServiceDefinition
from ivmstream.spark.changes import Specs, change_file, decode_changes, events_of, file_spec, images_of
from ivmstream.spark.changes import read_change_file as _read_change_file
from ivmstream.spark.decode import (
    DECIMAL,
    KEY,
    MULT,
    SPARK_TYPES,
    append_events,
    events_by_relation,
    net_bags,
)
from ivmstream.spark.kafka_source import read_kafka
from ivmstream.spark.snapshot import SUFFIXES, SnapshotError, read_snapshot
from ivmstream.state import StateStore

Image = tuple[str, str, str, str]  # input (topic or file), relation, primary key, image JSON
RelationsOf = Callable[[SparkSession, dict[str, DataFrame]], dict[str, DataFrame]]


def refuse_rekeyed(config: ServiceConfig) -> None:
    from ivmstream.spark.jobs import BatchError

    if config.rekeyed:
        raise BatchError(
            f"{config.source}: bootstrap and reconcile read inputs of a keyless view only; a keyed view "
            "over inputs is re-keyed (ivmstream rekey), and its workers' copies are told apart by origin "
            "tags: start it from the input topics, and check it against `ivmstream replay` of the records"
        )


def input_specs(config: ServiceConfig) -> dict[str, Any]:
    return {spec.topic: spec.change for spec in config.inputs}


def read_snapshot_changes(
    spark: SparkSession, path: str | Path, schema: Schema, inputs: Specs
) -> tuple[dict[str, DataFrame], list[Image]]:
    """A snapshot whose tables may be change files (``R.<format>.jsonl``; a single file of any tables:
    ``NAME.<format>.jsonl``): each relation's rows (key, columns, ``__mult``) and the images kept."""
    p = Path(path)
    files: dict[str, tuple[Path, Any]] = {}  # relation (or "" for a file of any table) -> file, spec
    if p.is_file() and change_file(p) is not None:
        name, fmt = change_file(p)  # type: ignore[misc]
        files[""] = (p, file_spec(name if name in schema.relations else None, fmt, inputs))
    elif p.is_dir():
        for name in schema.relations:
            plain = [p / f"{name}{s}" for s in SUFFIXES] + [p / name]
            changes = sorted(f for f in p.glob(f"{name}.*.jsonl") if change_file(f) is not None)
            if changes and not any(c.exists() for c in plain):
                _rel, fmt = change_file(changes[0])  # type: ignore[misc]
                files[name] = (changes[0], file_spec(name, fmt, inputs))
    if not files:
        return read_snapshot(spark, p, schema), []
    frames: dict[str, DataFrame] = {}
    if "" not in files and len(files) < len(schema.relations):
        frames = _tables(spark, p, schema, set(files))
    records = None
    for file, _spec in files.values():
        df = _read_change_file(spark, file)
        records = df if records is None else records.unionByName(df)
    assert records is not None
    decoded = decode_changes(records, schema, {str(f): s for f, s in files.values()}).cache()
    for name, events in events_by_relation(events_of(decoded), schema).items():
        if name in files or "" in files:
            frames[name] = events.select(KEY, *schema.relations[name].column_names, MULT)
    return frames, images_of(decoded)


def _tables(spark: SparkSession, path: Path, schema: Schema, skip: set[str]) -> dict[str, DataFrame]:
    """The relations of a snapshot directory that are tables (not change files)."""
    from ivmstream.events import Schema as _Schema

    rest = _Schema({n: r for n, r in schema.relations.items() if n not in skip}, schema.key_field)
    if not rest.relations:
        return {}
    return read_snapshot(spark, path, rest)


def read_inputs(
    spark: SparkSession,
    bootstrap: str,
    config: ServiceConfig,
    starts: Mapping[str, Mapping[int, int]],
    ends: Mapping[str, Mapping[int, int]],
    kafka: Mapping[str, str],
) -> DataFrame | None:
    """Every input topic's records from ``starts`` up to ``ends``, in one frame; None when there are none."""
    frames = [
        f
        for spec in config.inputs
        if (f := read_input(spark, bootstrap, spec.topic, starts[spec.topic], ends[spec.topic], kafka))
        is not None
    ]
    if not frames:
        return None
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def read_input(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    kafka: Mapping[str, str],
) -> DataFrame | None:
    """One input topic's records from ``start`` up to ``end`` (per partition); None when there are none."""
    if all(end.get(p, s) <= s for p, s in start.items()):
        return None
    return read_kafka(
        spark,
        bootstrap,
        topic,
        starting=orjson.dumps({str(p): o for p, o in start.items()}).decode(),
        ending=orjson.dumps({str(p): end.get(p, o) for p, o in start.items()}).decode(),
        options={f"kafka.{k}": v for k, v in kafka.items()},
    ).select("key", "value", "topic", "partition", "offset")


def input_offsets(
    bootstrap_servers: str, config: ServiceConfig, where: str, kafka: Mapping[str, str]
) -> dict[str, dict[int, int]]:
    """``where`` (earliest, latest or P:O,...) resolved in every input topic: topic -> partition -> offset."""
    from ivmstream.spark.jobs import topic_offsets

    return {s.topic: topic_offsets(bootstrap_servers, s.topic, where, kafka) for s in config.inputs}


def unread_relations(parts: Mapping[str, list[DataFrame]], topics_read: bool) -> list[str]:
    """The relations no snapshot table or topic record gave rows: empty relations when the input topics
    were read (a topic holding no records, or none up to the offsets read, is an empty table), else an
    error (without topics, a relation the snapshot lacks would pass for an empty one)."""
    from ivmstream.spark.jobs import BatchError

    missing = [name for name, frames in parts.items() if not frames]
    if missing and not topics_read:
        raise BatchError(f"no input for relation {missing[0]!r}: the snapshot lacks it and no topic was read")
    return missing


def empty_relation(spark: SparkSession, schema: Schema, name: str) -> DataFrame:
    """No rows of relation ``name``, with the columns (and types) its decoded events have."""
    fields = [
        StructField(c, DECIMAL if t in ("decimal", "exact") else SPARK_TYPES[t])
        for c, t in schema.relations[name].columns
    ]
    return spark.createDataFrame(
        [], StructType([StructField(KEY, StringType()), *fields, StructField(MULT, LongType())])
    )


def require_every_relation(
    spark: SparkSession, parts: dict[str, list[DataFrame]], schema: Schema, topics_read: bool
) -> None:
    """Every relation has a frame: its rows, or none when its topics were read and held none."""
    for name in unread_relations(parts, topics_read):
        parts[name].append(empty_relation(spark, schema, name))


@dataclass
class InputChanges:
    """The rows a view over inputs starts from: each relation's frames, the images kept for upsert-mode
    inputs, and the offset up to which each input partition was read."""

    parts: dict[str, list[DataFrame]]
    images: list[Image]
    offsets: dict[tuple[str, int], int]


def read_input_changes(
    spark: SparkSession,
    config: ServiceConfig,
    schema: Schema,
    snapshot: str | None,
    bootstrap_servers: str | None,
    from_offsets: str,
    kafka: Mapping[str, str],
) -> InputChanges:
    """The snapshot's rows and images, then (with ``bootstrap_servers``) every input topic from its
    beginning up to ``from_offsets``, decoded by the stream's codecs in each partition's order; every
    relation has a frame (an empty one for a relation whose topics held no records)."""
    specs = input_specs(config)
    parts: dict[str, list[DataFrame]] = {n: [] for n in schema.relations}
    images: list[Image] = []
    if snapshot is not None:
        frames, images = read_snapshot_changes(spark, snapshot, schema, specs)
        for name, df in frames.items():
            parts[name].append(df)
    offsets: dict[tuple[str, int], int] = {}
    if bootstrap_servers:
        starts = input_offsets(bootstrap_servers, config, "earliest", kafka)
        ends = input_offsets(bootstrap_servers, config, from_offsets, kafka)
        offsets = {(t, p): o for t, per in ends.items() for p, o in per.items()}
        records = read_inputs(spark, bootstrap_servers, config, starts, ends, kafka)
        if records is not None:
            decoded = decode_changes(records, schema, specs).cache()
            append_events(parts, events_of(decoded), schema)
            images += images_of(decoded)
    require_every_relation(spark, parts, schema, topics_read=bool(bootstrap_servers))
    return InputChanges(parts, images, offsets)


def image_owner(source: str, relation: str, config: ServiceConfig) -> str:
    """The input whose images a kept image joins: its own topic, or for a change file the upsert-mode
    input of its relation."""
    from ivmstream.spark.jobs import BatchError

    topics = {spec.topic for spec in config.inputs}
    if source in topics:
        return source
    owners = [s.topic for s in config.inputs if s.change is not None and s.change.images]
    named = [t for t in owners if input_specs(config)[t].relation == relation]
    found = named or [t for t in owners if input_specs(config)[t].relation is None]
    if len(found) != 1:
        raise BatchError(
            f"the snapshot's {relation} rows are kept as images (upsert mode), but "
            f"{'no' if not found else 'more than one'} upsert-mode input reads {relation}: "
            "name the relation on one input"
        )
    return found[0]


def bootstrap_inputs(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    snapshot: str | None,
    store: StateStore,
    *,
    bootstrap_servers: str | None,
    from_offsets: str,
    relations_of: RelationsOf | None = None,
) -> Any:
    """``relations_of``: the service's relations from the inputs' net bags, where the inputs are not
    the service's relations (a view compiled from SQL reads base tables through its intake)."""
    from ivmstream.spark.jobs import (
        BatchError,
        BootstrapReport,
        commit_states,
        kafka_settings,
        load_jobs,
        place_states,
    )

    refuse_rekeyed(config)
    started = time.monotonic()
    jobs = load_jobs(service)
    schema = schema_of(service, config)
    slot = slot_topic(service.name)
    if not store.load(slot, 0).empty:
        raise BatchError(
            f"state for the view {slot} already exists; bootstrap only into an empty state store"
        )
    if from_offsets not in ("latest", "earliest"):
        raise BatchError(
            "a view over inputs resumes every input at its end (latest: the topics are read up to it) "
            f"or at its beginning (earliest: the snapshot alone), not at {from_offsets!r}"
        )
    read = read_input_changes(
        spark, config, schema, snapshot, bootstrap_servers, from_offsets, kafka_settings(config)
    )
    bags = net_bags(read.parts, schema)
    if relations_of is not None:
        bags = relations_of(spark, bags)

    def keyless(key: str) -> int:
        if key != KEYLESS:
            raise BatchError(f"{service.name}'s batch job built a state for key {key!r} of a keyless view")
        return 0

    per_partition, keys = place_states(spark, jobs, bags, service, config, [0], keyless)
    changes, offsets = per_partition[0], read.offsets
    spec_text = orjson.dumps([s.describe() for s in config.inputs])
    reserved: list[tuple[str, bytes, bytes | None]] = [
        ("offsets", f"{t}:{p}".encode(), str(o).encode()) for (t, p), o in sorted(offsets.items())
    ]
    changes.entries[INPUTS_KEY] = [*reserved, ("spec", b"inputs", spec_text)]
    for source, relation, identity, image in read.images:
        owner = image_owner(source, relation, config)
        entry = ("images", json_bytes([relation, identity]), image.encode())  # kept in bulk until written
        changes.entries.setdefault(IMAGES_KEY + owner, []).append(entry)  # type: ignore[arg-type]
    size = commit_states(store, slot, per_partition, {0: sum(offsets.values())}, service, config)
    store.close()
    resumes = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
    return BootstrapReport(keys, {0: sum(offsets.values())}, size, time.monotonic() - started, resumes)


def reconcile_inputs(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap_servers: str,
    redis_client: Any,
    *,
    snapshot: str | None,
    from_offsets: str,
) -> Any:
    from ivmstream.spark.jobs import BatchError, Reconciliation

    refuse_rekeyed(config)
    run = Reconciliation.begin(service, config, bootstrap_servers, redis_client)
    schema, kafka, report = run.schema, run.kafka, run.report
    record = run.published.get(KEYLESS)
    if record is None:
        return report
    reflects: dict[str, int] = record["offsets"]
    topics = {s.topic for s in config.inputs}
    starts = input_offsets(bootstrap_servers, config, from_offsets, kafka)
    ends: dict[str, dict[int, int]] = {t: dict(starts[t]) for t in topics}
    for where, end in reflects.items():
        topic, _, partition = where.rpartition(":")
        if topic not in topics:
            raise BatchError(f"the published result reflects {topic}, which the config's inputs do not name")
        ends[topic][int(partition)] = int(end)
    report.offsets = {f"{t}:{p}": o for t in sorted(ends) for p, o in sorted(ends[t].items())}
    parts = run.empty_parts()
    if snapshot is not None:
        for name, df in read_snapshot_changes(spark, snapshot, schema, input_specs(config))[0].items():
            parts[name].append(df)
    records = read_inputs(spark, bootstrap_servers, config, starts, ends, kafka)
    if records is not None:
        dead = {
            (d.topic, d.partition, d.offset)
            for d in read_dead_letters(bootstrap_servers, config.dlq_topic, kafka=kafka)
            if d.topic in topics
            and starts[d.topic].get(d.partition, 0) <= d.offset < ends[d.topic].get(d.partition, 0)
        }
        if dead:
            refused = spark.createDataFrame(sorted(dead), "topic string, partition int, offset long")
            records = records.join(refused, ["topic", "partition", "offset"], "left_anti")
        report.engine_refused = len(dead)
        decoded = events_of(decode_changes(records, schema, input_specs(config))).cache()
        report.undecodable = decoded.where(F.col("error").isNotNull()).count()
        append_events(parts, decoded, schema)
    require_every_relation(spark, parts, schema, topics_read=True)
    return run.finish(spark, parts, {KEYLESS: record["result"]})


__all__ = [
    "InputChanges",
    "SnapshotError",
    "bootstrap_inputs",
    "image_owner",
    "input_offsets",
    "read_input",
    "read_input_changes",
    "read_inputs",
    "read_snapshot_changes",
    "reconcile_inputs",
    "refuse_rekeyed",
    "require_every_relation",
]
