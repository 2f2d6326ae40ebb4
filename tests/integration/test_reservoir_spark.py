"""Spark side of the reservoir service (docs/reservoir/algorithm.md §8): the bootstrap's engines hold
the snapshot's relations, index counts equal to Spark's and a valid sample; bootstrap then stream
runs on over a stream of duplicates, deletes and deletes of absent tuples; reconcile recomputes the
live relations exactly, matches a published result and catches a sampled row that is not a join row,
a wrong sample size and a wrong exact |Q|."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from ivmstream.compare import diff
from ivmstream.config import load_config, schema_of
from ivmstream.service import load_service
from ivmstream.services.reservoir.batch import build_state, comparable, recompute
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.service import LINE3_CONFIG
from ivmstream.spark.decode import net_bags
from ivmstream.spark.snapshot import read_snapshot

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "reservoir" / "data" / "graph.jsonl"
SERVICE = load_service("reservoir")


def test_spark_rounds_counts_up_to_powers_of_two_exactly(spark):
    from decimal import Decimal

    from pyspark.sql import functions as F

    from ivmstream.services.reservoir.batch import COUNT, nextpow2
    from ivmstream.services.reservoir.index import nextpow2 as engine_nextpow2

    values = [0, 1, 2, 3, 5, 1023, 1024, 1025, 2**53 - 1, 2**53 + 1, 2**60 - 1, 2**60, 2**60 + 1]
    values += [2**100 + 1, 10**37, 2**125 + 3, random.Random(1).randrange(2**120)]
    df = spark.createDataFrame([(Decimal(v),) for v in values], "c decimal(38,0)")
    got = [int(r["r"]) for r in df.select(nextpow2(F.col("c").cast(COUNT)).alias("r")).collect()]
    assert got == [engine_nextpow2(v) if v else 0 for v in values]


def walks3(engine: ReservoirEngine) -> set[tuple[int, int, int, int]]:
    """Line-3 results by hash lookups over the engine's edge relation (an oracle independent of it)."""
    edges = list(engine.rels["G1"])
    out_of: dict[int, list[int]] = {}
    for s, d in edges:
        out_of.setdefault(s, []).append(d)
    return {(a, b, c, d) for a, b in edges for c in out_of.get(b, ()) for d in out_of.get(c, ())}


def configured(tmp_path: Path, **extra: Any):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**LINE3_CONFIG, **extra}))
    return load_config(SERVICE, path)


def bags_of(spark, config, snapshot: Path):
    schema = schema_of(SERVICE, config)
    bags = net_bags({n: [df] for n, df in read_snapshot(spark, snapshot, schema).items()}, schema)
    return {name: df.cache() for name, df in bags.items()}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"strategy": "sjoin", "predicate": None},
        {"strategy": "rsjoin-opt", "with_replacement": True, "k": 7},
    ],
    ids=["rsjoin-theta", "sjoin-exact", "opt-replacement"],
)
def test_bootstrap_builds_valid_engines_and_recompute_agrees_with_them(spark, tmp_path, extra):
    config = configured(tmp_path, **extra)
    bags = bags_of(spark, config, SAMPLE)
    states = dict(build_state(spark, bags, config.options))
    assert sorted(states) == ["g1", "g2"]
    expected = recompute(spark, bags, config.options)
    for key, snap in states.items():
        engine = ReservoirEngine(config.options)
        engine.restore(snap)
        join = {r for r in walks3(engine) if engine.theta is None or engine.theta(r)}
        rows = engine.rows()
        assert set(rows) <= join and len(join) > config.options["k"]
        assert len(rows) == config.options["k"]
        assert engine.join_size() in (None, len(join))
        assert diff(expected[key], comparable(engine.result())) == []
        if key != "g1" or extra:
            continue
        # a sampled row outside the join, a short sample and a wrong exact size are all caught
        bad = engine.result()
        bad["sample"][0] = {c: -1 for c in bad["sample"][0]}
        assert [d.split(":")[0] for d in diff(expected[key], comparable(bad))] == ["$.sample"]
        short = {**engine.result(), "sample": engine.result()["sample"][1:]}
        assert any(d.startswith("$.sample_size") for d in diff(expected[key], comparable(short)))
        wrong = {**engine.result(), "join_size": len(join) + 1}
        assert [d.split(":")[0] for d in diff(expected[key], comparable(wrong))] == ["$.join_size"]


def churned(lines: list[bytes]) -> list[dict[str, Any]]:
    """The stream's events with, after some of them, what the live set must be computed in offset order
    for: the edge inserted again then deleted (gone, though its net count is +1), deleted twice (the
    second refused) then inserted again, or inserted again (refused) and deleted once."""
    events = [orjson.loads(x) for x in lines]
    rng = random.Random(4)
    out: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        out.append(ev)
        if i % 7:
            continue
        again, gone = {**ev, "delta": 1}, {**ev, "delta": -1}
        out += [[again, gone], [gone, gone, again], [again, gone, again]][rng.randrange(3)]
    return out


def test_bootstrap_then_stream_then_reconcile(spark, broker, redis_server, unique, tmp_path):
    from helpers import rocksdb_snapshots, run_worker_to_end, spark_bootstrap, stream_config

    from ivmstream.events import read_source
    from ivmstream.redis_client import connect
    from ivmstream.runtime.output import result_key
    from ivmstream.runtime.produce import produce_records
    from ivmstream.spark.runs import run_reconcile
    from ivmstream.state import open_store

    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    head, tail = tmp_path / "head.jsonl", tmp_path / "tail.jsonl"
    first = lines[: len(lines) // 2]
    doubled = first[::5]  # a snapshot may hold a tuple twice: present once, as bootstrap reads it
    head.write_bytes(b"".join(first + doubled))
    deletes = [{**orjson.loads(line), "delta": -1} for line in doubled[::2]]  # one delete removes it
    tail.write_bytes(
        b"".join(orjson.dumps(ev) + b"\n" for ev in [*churned(lines[len(lines) // 2 :]), *deletes])
    )
    topic, group, out = f"{unique}.updates", f"{unique}-g", f"{unique}.results"
    broker.create_topic(topic, 2)
    # the exact index without θ publishes |Q|, so a recomputation holding a tuple too many is caught
    exact = {**LINE3_CONFIG, "strategy": "sjoin", "predicate": None}
    cfg = stream_config(tmp_path / "c.json", unique, **exact, checkpoint_interval=0.2)
    config = load_config(SERVICE, cfg)
    state = tmp_path / "state"
    report = spark_bootstrap(
        spark, SERVICE, config, head, group=group, state_dir=state, bootstrap=broker.bootstrap
    )
    assert report.keys == 2
    snaps = rocksdb_snapshots(
        group, state, topic, partitions=2, new_engine=lambda: SERVICE.engine(config.options)
    )
    assert sorted(snaps) == ["g1", "g2"]

    produce_records(broker.bootstrap, topic, read_source(tail, key_field="graph"))
    client = connect(redis_server.url)
    results = run_worker_to_end(
        SERVICE, config, broker.bootstrap, open_store("rocksdb", group, state_dir=state), group, client
    )
    assert sorted(results) == ["g1", "g2"]
    assert all(len(r["sample"]) == config.options["k"] for r in results.values())

    # one reconcile checks both: g1 as published matches, g2 with a sampled row outside the join does not
    record = orjson.loads(client.get(result_key(out, "g2")) or b"{}")
    record["result"]["sample"][0]["a"] = 10_000
    client.set(result_key(out, "g2"), orjson.dumps(record))
    report = run_reconcile(spark, SERVICE, config, broker.bootstrap, client, snapshot=str(head))
    assert report.keys == 2 and list(report.mismatches) == ["g2"], report.mismatches
    assert [d.split(":")[0] for d in report.mismatches["g2"]] == ["$.sample"]
