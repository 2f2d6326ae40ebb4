"""Bootstrap and reconcile, in Spark, for a keyed view fed through ``ivmstream rekey``.

Such a view's state lives in two places (``ivmstream.runtime.rekey``): the workers keep one engine per
key on the partition of the re-keyed topic its key hashes to, with that partition's offset and the
origin marks of the copies it dropped; the step keeps the next offset of every input partition and the
kept images of its upsert-mode inputs.

- **Bootstrap** reads every input topic from its beginning to its current end (on top of an optional
  snapshot), decodes it with the stream's codecs (``ivmstream.spark.changes``), builds each key's
  state with the service's batch job and writes it to the key's re-keyed partition at that partition's
  current end (the records already there are the step's earlier output, which the inputs read here
  cover), and writes the step's checkpoint: each input partition's end and the kept images. The step
  then goes on from the ends and the workers from the re-keyed topic's end.
- **Reconcile** reads each key's published result with the origin marks it carries (per input
  partition, the last input record whose events its partition had applied; a bootstrap sets them to
  the records it read), decodes every input topic from its beginning up to those marks with the same
  codecs, keeps each key's events at or below its marks (by offset, then by the event's index in its
  record), without the events the workers' engines refused (dead-lettered under the re-keyed topic's
  offsets: their origin tags are read there), recomputes each key's result with the service's Spark
  SQL and compares.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from ivmstream.config import ServiceConfig, schema_of
from ivmstream.partitioner import partition_for
from ivmstream.runtime.merged import IMAGES_KEY, INPUTS_KEY
from ivmstream.runtime.rekey import ORIGIN_HEADER, step_envelope, step_slot, step_spec
from ivmstream.service import ServiceDefinition
from ivmstream.spark.changes import decode_changes, events_of
from ivmstream.spark.decode import KEY, append_events, net_bags
from ivmstream.spark.inputs import image_owner, input_offsets, input_specs, read_input, read_input_changes
from ivmstream.state import StateChanges, StateStore

BOOTSTRAPPED = 2**31  # the index of a bootstrap's mark: past every event of the record it names


def _refuse_unkeyed(config: ServiceConfig) -> None:
    from ivmstream.spark.jobs import BatchError

    if config.key_field is None:
        raise BatchError(
            f"{config.source}: a keyless view over inputs publishing every event (its events re-keyed to one "
            "partition) is bootstrapped and reconciled as a view over inputs publishing per batch is not: "
            "check it against `ivmstream replay` of the records"
        )


def bootstrap_rekeyed(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    snapshot: str | None,
    store: StateStore,
    step_store: StateStore,
    *,
    bootstrap_servers: str | None,
    from_offsets: str,
) -> Any:
    """The workers' states (``store``) and the step's positions and images (``step_store``) as they
    would be after the step and the workers had read every input to its end."""
    from ivmstream.spark.jobs import (
        BatchError,
        BootstrapReport,
        commit_states,
        kafka_settings,
        load_jobs,
        place_states,
        topic_offsets,
    )

    _refuse_unkeyed(config)
    started = time.monotonic()
    if not bootstrap_servers:
        raise BatchError("bootstrap of a re-keyed view needs --bootstrap (the re-keyed topic's partitions)")
    if from_offsets not in ("latest", "earliest"):
        raise BatchError(
            "a re-keyed view resumes every input at its end (latest) or its beginning (earliest: the "
            f"snapshot alone), not at {from_offsets!r}"
        )
    jobs = load_jobs(service)
    schema = schema_of(service, config)
    kafka = kafka_settings(config)
    out = config.input_topic
    out_ends = topic_offsets(bootstrap_servers, out, "latest", kafka)
    slot = step_slot(service.name)
    if not step_store.load(slot, 0).empty or any(not store.load(out, p).empty for p in out_ends):
        raise BatchError(
            f"state for {out} or the step {slot} already exists; bootstrap only into empty stores"
        )
    read = read_input_changes(spark, config, schema, snapshot, bootstrap_servers, from_offsets, kafka)
    n = len(out_ends)
    per_partition, keys = place_states(
        spark,
        jobs,
        net_bags(read.parts, schema),
        service,
        config,
        out_ends,
        lambda key: partition_for(key, n),
    )
    offsets = read.offsets
    # every re-keyed partition has applied every input record read here: its origin marks say so (the
    # step's next writes are tagged above them), and so do the results its workers publish
    marks = orjson.dumps(
        {f"{t}:{p}": [o - 1, BOOTSTRAPPED] for (t, p), o in sorted(offsets.items()) if o > 0}
    )
    for changes in per_partition.values():
        changes.origins = marks
    size = commit_states(store, out, per_partition, out_ends, service, config)
    step = StateChanges()
    step.entries[INPUTS_KEY] = [  # type: ignore[assignment]
        *(("offsets", f"{t}:{p}".encode(), str(o).encode()) for (t, p), o in sorted(offsets.items())),
        ("spec", b"inputs", step_spec(config, len(out_ends))),
    ]
    for source, relation, identity, image in read.images:
        entry = ("images", orjson.dumps([relation, identity]), image.encode())
        step.entries.setdefault(IMAGES_KEY + image_owner(source, relation, config), []).append(entry)  # type: ignore[arg-type]
    size += step_store.commit(
        slot, 0, sum(offsets.values()), step, step_envelope(service, config).to_bytes()
    ).bytes
    store.close()
    step_store.close()
    resumes = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
    return BootstrapReport(keys, dict(out_ends), size, time.monotonic() - started, resumes)


def refused_origins(
    bootstrap: str, config: ServiceConfig, kafka: dict[str, str]
) -> list[tuple[str, int, int]]:
    """The origin (input partition, offset, index) of each re-keyed record the workers' engines refused:
    they dead-letter it under the re-keyed topic's offset, so its tag is read there (dead letters are few:
    one record each, in the driver)."""
    from confluent_kafka import Consumer, TopicPartition

    from ivmstream.runtime.dlq import read_dead_letters, reader_settings
    from ivmstream.spark.jobs import BatchError

    dead = sorted(
        {
            (d.partition, d.offset)
            for d in read_dead_letters(bootstrap, config.dlq_topic, kafka)
            if d.topic == config.input_topic
        }
    )
    if not dead:
        return []
    consumer = Consumer(reader_settings(bootstrap, kafka))
    out = []
    try:
        for partition, offset in dead:
            consumer.assign([TopicPartition(config.input_topic, partition, offset)])
            msg = consumer.poll(10)
            if msg is None or msg.error() is not None or msg.offset() != offset:
                raise BatchError(
                    f"cannot read {config.input_topic}:{partition}@{offset}, which a worker refused"
                )
            tag = dict(msg.headers() or []).get(ORIGIN_HEADER)
            if tag is not None:
                where, at, index = (tag.decode() if type(tag) is bytes else str(tag)).rsplit(":", 2)
                out.append((where, int(at), int(index)))
    finally:
        consumer.close()
    return out


def reconcile_rekeyed(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap_servers: str,
    redis_client: Any,
    *,
    snapshot: str | None = None,
    from_offsets: str = "earliest",
) -> Any:
    """Recompute every published key's result from the input records it reflects (by its origin marks),
    decoded from the input topics, and compare."""
    from ivmstream.spark.jobs import BatchError, Reconciliation
    from ivmstream.spark.snapshot import read_snapshot

    _refuse_unkeyed(config)
    run = Reconciliation.begin(service, config, bootstrap_servers, redis_client)
    schema, kafka, published, report = run.schema, run.kafka, run.published, run.report
    if not published:
        return report
    topics = {s.topic for s in config.inputs}
    covered: list[tuple[str, str, int, int]] = []  # key, input partition, the last (offset, index) applied
    for key, rec in published.items():
        for where, (offset, index) in (rec.get("origins") or {}).items():
            if where.rpartition(":")[0] not in topics:
                raise BatchError(f"the result for key {key!r} reflects {where}, which no input names")
            covered.append((key, where, int(offset), int(index)))
    starts = input_offsets(bootstrap_servers, config, from_offsets, kafka)
    ends: dict[str, dict[int, int]] = {t: dict(starts[t]) for t in topics}
    for _key, where, offset, _index in covered:
        topic, _, partition = where.rpartition(":")
        ends[topic][int(partition)] = max(ends[topic].get(int(partition), 0), offset + 1)
    report.offsets = {f"{t}:{p}": o for t in sorted(ends) for p, o in sorted(ends[t].items())}
    parts = run.empty_parts()
    if snapshot is not None:
        for name, df in read_snapshot(spark, snapshot, schema).items():
            parts[name].append(df)
    marks = spark.createDataFrame(covered, f"{KEY} string, _where string, _offset long, _index long")
    refused = refused_origins(bootstrap_servers, config, kafka)
    report.engine_refused = len(refused)
    refused_events = spark.createDataFrame(refused, "_where string, offset long, _i long")
    for spec in config.inputs:
        records = read_input(
            spark, bootstrap_servers, spec.topic, starts[spec.topic], ends[spec.topic], kafka
        )
        if records is None:
            continue
        decoded = events_of(decode_changes(records, schema, input_specs(config))).cache()
        report.undecodable += decoded.where(F.col("error").isNotNull()).count()
        # each event's index in its record (the records of one task keep their events' order)
        record = Window.partitionBy("partition", "offset").orderBy(F.monotonically_increasing_id())
        indexed = decoded.withColumn("_i", F.row_number().over(record) - 1).withColumn(
            "_where", F.concat(F.lit(f"{spec.topic}:"), F.col("partition").cast("string"))
        )
        indexed = indexed.join(refused_events, ["_where", "offset", "_i"], "left_anti")
        applied = indexed.join(marks, [KEY, "_where"]).where(
            (F.col("offset") < F.col("_offset"))
            | ((F.col("offset") == F.col("_offset")) & (F.col("_i") <= F.col("_index")))
        )
        append_events(parts, applied, schema)
    return run.finish(spark, parts, {key: rec["result"] for key, rec in published.items()})


__all__ = ["bootstrap_rekeyed", "reconcile_rekeyed"]
