"""``sql bootstrap`` and ``sql reconcile``: the services' Spark jobs configured from the SQL.

- bootstrap: each unit's service builds its state with its own Spark job (``BatchJobs.build_state``)
  from the unit's relations as the view's intake makes them from the tables' files (what ``sql
  produce`` would publish), written as the unit's workers' checkpoint; they resume from the offset of
  ``<view>.updates`` given (default its end).
- reconcile: the view's published rows against the view's own SQL evaluated by Spark SQL
  (``ivmstream.sql.recompute``) over the base tables exactly as far as the published results reach:
  for a view fed by ``sql produce``, the prefix of the tables' events whose intake fills
  ``<view>.updates`` up to the result's offset; for a view over topic-backed tables, each table
  topic's records before the result's offset of each partition, decoded by the table's format, less
  the records the stream dead-lettered.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events import EventError, Schema
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import NATIVE, ChangeSpec, ImageTable
from ivmstream.events.codec import EventCodec
from ivmstream.sql.errors import SqlError
from ivmstream.sql.inputs import Event, InputChoice, read_events
from ivmstream.sql.model import Script, Table, TopicSource
from ivmstream.sql.recompute import Bag, evaluate, row_differences, sample_differences
from ivmstream.sql.replay import encode
from ivmstream.sql.streaming import StreamUnit
from ivmstream.sql.topics import table_relation

Bags = dict[str, Counter[tuple[Any, ...]]]


def _views(units: list[StreamUnit]) -> list[list[StreamUnit]]:
    out: dict[str, list[StreamUnit]] = {}
    for u in units:
        out.setdefault(u.plan.view.name, []).append(u)
    return list(out.values())


# --- bootstrap ----------------------------------------------------------------------------------------


def bootstrap_views(
    spark: Any,
    script: Script,
    units: list[StreamUnit],
    choice: InputChoice,
    open_store: Callable[[StreamUnit], Any],
    *,
    bootstrap_servers: str | None = None,
    from_offsets: str = "latest",
) -> list[dict[str, Any]]:
    """Every unit's state built by its service's Spark job from the tables' files, or for a unit over
    topic-backed tables from their topics (and its static tables' files); one report each."""
    from ivmstream.spark.runs import run_bootstrap

    for u in units:
        if u.service.batch is None:
            raise SqlError(
                f"view {u.plan.view.name}: service {u.service.name} has no Spark jobs to bootstrap it",
                u.plan.view.where,
            )
    out = []
    with tempfile.TemporaryDirectory(prefix="ivmstream-sql-") as tmp:
        for i, u in enumerate(units):
            if u.tables:
                from ivmstream.sql.batch_topics import bootstrap_topic_unit

                out.append(
                    bootstrap_topic_unit(
                        spark, script, u, choice, open_store(u), bootstrap_servers, from_offsets
                    )
                )
                continue
            snapshot = Path(tmp) / f"unit{i}.jsonl"
            tables = {f.table for f in u.unit.feeds}
            with open(snapshot, "wb") as fh:
                for table, row, delta in read_events(script, tables, choice):
                    for feed in u.unit.feeds:
                        if feed.table == table:
                            ev = feed.event(row, delta)
                            if ev is not None:
                                fh.write(encode(ev) + b"\n")
            report = run_bootstrap(
                spark,
                u.service,
                u.config,
                str(snapshot),
                open_store(u),
                bootstrap_servers=bootstrap_servers,
                from_offsets=from_offsets,
            )
            out.append(
                {
                    "view": u.plan.view.name,
                    "service": u.service.name,
                    "input": u.config.input_topic,
                    "resume": {f"{u.config.input_topic}:{p}": o for p, o in report.partitions.items()},
                    "bytes": report.bytes_written,
                }
            )
    return out


# --- reconcile: the base tables as far as the results reach -------------------------------------------


def _bags(script: Script, names: set[str]) -> Bags:
    return {n: Counter() for n in sorted(names)}


def _add(bags: Bags, script: Script, table: str, row: Mapping[str, Any], delta: int) -> None:
    bags[table][tuple(row[c] for c in script.tables[table].columns)] += delta


def produced_prefix(
    script: Script,
    view_units: list[StreamUnit],
    choice: InputChoice,
    ends: Mapping[str, int],
    refused: Mapping[str, set[int]] | None = None,
) -> Bags:
    """The tables' net bags over the shortest prefix of their events whose intake fills each unit's
    ``<view>.updates`` up to its end, less the events any of whose records the workers refused
    (``refused``: offsets per topic); SqlError when the units reflect different prefixes."""
    tables = {f.table for u in view_units for f in u.unit.feeds}
    bags = _bags(script, tables)
    counts = {u.config.input_topic: 0 for u in view_units}
    events: Iterator[Event] = read_events(script, tables, choice)
    for table, row, delta in events:
        if all(counts[t] >= ends.get(t, 0) for t in counts):
            break
        dead = False
        for u in view_units:
            topic = u.config.input_topic
            for feed in u.unit.feeds:
                if feed.table == table and feed.event(row, delta) is not None:
                    dead |= counts[topic] in (refused or {}).get(topic, ())
                    counts[topic] += 1
        if not dead:
            _add(bags, script, table, row, delta)
    behind = {t: (counts[t], ends.get(t, 0)) for t in counts if counts[t] != ends.get(t, 0)}
    if behind:
        raise SqlError(
            f"view {view_units[0].plan.view.name}: its units' results reflect different input prefixes "
            f"({', '.join(f'{t}: {n} events, result at {e}' for t, (n, e) in behind.items())}); "
            "reconcile once every unit has caught up"
        )
    return bags


def topic_prefix(
    spark: Any,
    script: Script,
    tables: list[Table],
    bootstrap: str,
    ends: Mapping[str, int],
    refused: set[tuple[str, int, int]],
) -> Bags:
    """The topic-backed tables' net bags over each partition's records before ``ends["topic:p"]``,
    decoded by each table's format in partition order; records in ``refused`` left out."""
    from ivmstream.spark.kafka_source import read_kafka

    bags = _bags(script, {t.name for t in tables})
    by_topic: dict[str, list[Table]] = {}
    for t in tables:
        assert isinstance(t.source, TopicSource)
        by_topic.setdefault(t.source.topic, []).append(t)
    for topic, readers in by_topic.items():
        marks = {int(tp.rsplit(":", 1)[1]): n for tp, n in ends.items() if tp.rsplit(":", 1)[0] == topic}
        if not any(marks.values()):
            continue
        log = read_kafka(spark, bootstrap, topic, "earliest", marks)
        records = sorted(log.select("partition", "offset", "key", "value").collect())
        decode = _decoder(readers)
        for partition, offset, key, value in records:
            if (topic, partition, offset) in refused:
                continue
            out = decode(partition, key, value)
            for ev in out if not isinstance(out, EventError) else []:
                if ev.relation in bags:
                    _add(bags, script, ev.relation, ev.row, ev.delta)
    return bags


def _decoder(tables: list[Table]) -> Callable[[int, Any, Any], Any]:
    """A record's events by its topic's format (per partition, so upsert images follow each key)."""
    src = tables[0].source
    assert isinstance(src, TopicSource)
    schema = Schema.of(*(table_relation(t) for t in tables))
    if src.format == NATIVE:
        native = EventCodec(schema)
        return lambda _p, _key, value: [
            e for e in native.decode_many([value]) if not isinstance(e, EventError)
        ]
    table = tables[0]
    images = src.format == "upsert-json" or src.mode == "upsert"
    spec = ChangeSpec(src.format, table.name, table.primary_key or None, src.project, images)
    codecs: dict[int, ChangeCodec] = {}

    def decode(partition: int, key: Any, value: Any) -> Any:
        codec = codecs.get(partition)
        if codec is None:
            codec = codecs[partition] = ChangeCodec(spec, schema, ImageTable() if images else None)
        return codec.decode(None if key is None else bytes(key), None if value is None else bytes(value))

    return decode


# --- reconcile ----------------------------------------------------------------------------------------


def reconcile_views(
    spark: Any,
    script: Script,
    units: list[StreamUnit],
    choice: InputChoice,
    bootstrap: str,
    kafka: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One report per view: ``verdict`` match, mismatch or nothing-published, the offsets the published
    rows reflect, and the first differences."""
    from ivmstream.runtime.dlq import latest_results, read_dead_letters

    reports = []
    for view_units in _views(units):
        plan = view_units[0].plan
        report: dict[str, Any] = {"view": plan.view.name, "service": plan.service}
        latest = [latest_results(bootstrap, u.config.output_topic, kafka=kafka) for u in view_units]
        if not all(latest):
            reports.append({**report, "verdict": "nothing-published"})
            continue
        records = [max(r.values(), key=lambda rec: sum(rec["offsets"].values())) for r in latest]
        ends: dict[str, int] = {}
        for rec in records:
            ends.update(rec["offsets"])
        report["offsets"] = ends
        tables = view_units[0].tables
        dead = [
            (d.topic, d.partition, d.offset)
            for u in view_units
            for d in read_dead_letters(bootstrap, u.config.dlq_topic, kafka=kafka)
        ]
        if tables:
            bags = topic_prefix(spark, script, tables, bootstrap, ends, set(dead))
            files = {t.name for t in view_units[0].files}
            bags.update(_bags(script, files))
            for table, row, delta in read_events(script, files, choice):
                _add(bags, script, table, row, delta)  # static tables: as bootstrap loaded them
        else:
            tops = {tp.rsplit(":", 1)[0]: n for tp, n in ends.items()}
            refused: dict[str, set[int]] = {}
            for topic, _p, offset in dead:
                refused.setdefault(topic, set()).add(offset)
            bags = produced_prefix(script, view_units, choice, tops, refused)
        published = plan.assemble([rec["result"] for rec in records])
        report["differences"] = differences(spark, script, plan, bags, published)
        report["verdict"] = "mismatch" if report["differences"] else "match"
        report["rows"] = len(published)
        reports.append(report)
    return reports


def differences(
    spark: Any, script: Script, plan: Any, bags: Mapping[str, Bag], published: list[Any]
) -> list[str]:
    """The published rows against Spark SQL's evaluation of the view (a sample: a sub-bag of the
    full result of the right size)."""
    features = None
    if plan.view.lifts:
        if plan.plan.get("ring") != "covariance":
            return [f"unsupported: reconciling a view lifted into the {plan.plan.get('ring')} ring"]
        features = plan.plan["features"]
    expected = evaluate(spark, plan.view, script.tables, bags, features)
    if plan.service == "reservoir":
        return sample_differences(published, expected, int(plan.plan["k"]))
    return row_differences(published, expected)


def report_line(report: Mapping[str, Any]) -> str:
    return orjson.dumps(report, default=str).decode()
