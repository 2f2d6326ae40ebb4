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
from ivmstream.spark.decode import DECIMAL, KEY, MULT, SPARK_TYPES, events_by_relation, net_bags
from ivmstream.spark.kafka_source import read_kafka
from ivmstream.spark.snapshot import SUFFIXES, SnapshotError, read_snapshot
from ivmstream.state import StateChanges, StateStore, envelope_for

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


def _read_inputs(
    spark: SparkSession,
    bootstrap: str,
    config: ServiceConfig,
    starts: Mapping[str, Mapping[int, int]],
    ends: Mapping[str, Mapping[int, int]],
    kafka: Mapping[str, str],
) -> DataFrame | None:
    frames = []
    for spec in config.inputs:
        start, end = starts[spec.topic], ends[spec.topic]
        if all(end.get(p, s) <= s for p, s in start.items()):
            continue
        frames.append(
            read_kafka(
                spark,
                bootstrap,
                spec.topic,
                starting=orjson.dumps({str(p): o for p, o in start.items()}).decode(),
                ending=orjson.dumps({str(p): end.get(p, o) for p, o in start.items()}).decode(),
                options={f"kafka.{k}": v for k, v in kafka.items()},
            ).select("key", "value", "topic", "partition", "offset")
        )
    if not frames:
        return None
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _input_offsets(
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


def _require_every_relation(
    spark: SparkSession, parts: dict[str, list[DataFrame]], schema: Schema, topics_read: bool
) -> None:
    """Every relation has a frame: its rows, or none when its topics were read and held none."""
    for name in unread_relations(parts, topics_read):
        parts[name].append(empty_relation(spark, schema, name))


def _image_owner(source: str, relation: str, config: ServiceConfig) -> str:
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
        _place,
        kafka_settings,
        load_jobs,
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
    specs = input_specs(config)
    parts: dict[str, list[DataFrame]] = {n: [] for n in schema.relations}
    images: list[Image] = []
    if snapshot is not None:
        frames, images = read_snapshot_changes(spark, snapshot, schema, specs)
        for name, df in frames.items():
            parts[name].append(df)
    offsets: dict[tuple[str, int], int] = {}
    if bootstrap_servers:
        kafka = kafka_settings(config)
        starts = _input_offsets(bootstrap_servers, config, "earliest", kafka)
        ends = _input_offsets(bootstrap_servers, config, from_offsets, kafka)
        offsets = {(t, p): o for t, per in ends.items() for p, o in per.items()}
        records = _read_inputs(spark, bootstrap_servers, config, starts, ends, kafka)
        if records is not None:
            decoded = decode_changes(records, schema, specs).cache()
            for name, events in events_by_relation(events_of(decoded), schema).items():
                parts[name].append(events.select(KEY, *schema.relations[name].column_names, MULT))
            images += images_of(decoded)
    _require_every_relation(spark, parts, schema, topics_read=bool(bootstrap_servers))
    changes = StateChanges()
    keys = 0
    bags = net_bags(parts, schema)
    if relations_of is not None:
        bags = relations_of(spark, bags)
    for key, state in jobs.build_state(spark, bags, config.options):
        if key != KEYLESS:
            raise BatchError(f"{service.name}'s batch job built a state for key {key!r} of a keyless view")
        _place(changes, key, state, lambda: service.engine(config.options), config.state_layout)
        keys += 1
    spec_text = orjson.dumps([s.describe() for s in config.inputs])
    reserved: list[tuple[str, bytes, bytes | None]] = [
        ("offsets", f"{t}:{p}".encode(), str(o).encode()) for (t, p), o in sorted(offsets.items())
    ]
    changes.entries[INPUTS_KEY] = [*reserved, ("spec", b"inputs", spec_text)]
    for source, relation, identity, image in images:
        owner = _image_owner(source, relation, config)
        entry = ("images", json_bytes([relation, identity]), image.encode())  # kept in bulk until written
        changes.entries.setdefault(IMAGES_KEY + owner, []).append(entry)  # type: ignore[arg-type]
    envelope = envelope_for(service, config.options, config.state_layout).to_bytes()
    size = store.commit(slot, 0, sum(offsets.values()), changes, envelope).bytes
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
    from ivmstream.spark.jobs import (
        BatchError,
        ReconcileReport,
        kafka_settings,
        load_jobs,
        read_published,
        result_differences,
    )

    refuse_rekeyed(config)
    started = time.monotonic()
    jobs = load_jobs(service)
    schema = schema_of(service, config)
    kafka = kafka_settings(config)
    published = read_published(redis_client, bootstrap_servers, config.output_topic, kafka)
    report = ReconcileReport(
        service.name, config.output_topic, "nothing-published", 0, checked_at=time.time()
    )
    record = published.get(KEYLESS)
    if record is None:
        return report
    reflects: dict[str, int] = record["offsets"]
    topics = {s.topic for s in config.inputs}
    starts = _input_offsets(bootstrap_servers, config, from_offsets, kafka)
    ends: dict[str, dict[int, int]] = {t: dict(starts[t]) for t in topics}
    for where, end in reflects.items():
        topic, _, partition = where.rpartition(":")
        if topic not in topics:
            raise BatchError(f"the published result reflects {topic}, which the config's inputs do not name")
        ends[topic][int(partition)] = int(end)
    report.offsets = {f"{t}:{p}": o for t in sorted(ends) for p, o in sorted(ends[t].items())}
    parts: dict[str, list[DataFrame]] = {n: [] for n in schema.relations}
    if snapshot is not None:
        for name, df in read_snapshot_changes(spark, snapshot, schema, input_specs(config))[0].items():
            parts[name].append(df)
    records = _read_inputs(spark, bootstrap_servers, config, starts, ends, kafka)
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
        for name, events in events_by_relation(decoded, schema).items():
            parts[name].append(events.select(KEY, *schema.relations[name].column_names, MULT))
    _require_every_relation(spark, parts, schema, topics_read=True)
    expected = jobs.recompute(spark, net_bags(parts, schema), config.options)
    report.keys = 1
    differences = result_differences(jobs, expected, KEYLESS, record["result"], config.options)
    if differences:
        report.mismatches[KEYLESS] = differences
    report.verdict = "mismatch" if report.mismatches else "match"
    report.seconds = time.monotonic() - started
    return report


__all__ = ["SnapshotError", "bootstrap_inputs", "read_snapshot_changes", "reconcile_inputs", "refuse_rekeyed"]
