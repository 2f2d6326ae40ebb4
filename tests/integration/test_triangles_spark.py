"""Spark BUILD(D₀) equals the engine's own BUILD, and bootstrap + stream equals streaming everything."""

from __future__ import annotations

import random

import pytest

from ivmstream.config import load_config
from ivmstream.events import Relation, Schema
from ivmstream.service import load_service
from ivmstream.services.triangles.batch import spark_build
from ivmstream.services.triangles.engine import create_engine
from ivmstream.spark.decode import KEY, MULT, net_bags


def random_relations(seed: int, n: int, dom: int) -> dict[str, dict[tuple[int, int], int]]:
    rng = random.Random(seed)
    data: dict[str, dict[tuple[int, int], int]] = {"R": {}, "S": {}, "T": {}}
    hub = 0  # a skewed value so that some degrees cross the thresholds
    for _ in range(n):
        rel = rng.choice("RST")
        x = hub if rng.random() < 0.3 else rng.randrange(dom)
        t = (x, rng.randrange(dom))
        data[rel][t] = data[rel].get(t, 0) + rng.choice([1, 1, 2, -1])
    return {r: {t: m for t, m in d.items() if m} for r, d in data.items()}


def bags_of(spark, data, key="k"):
    schema = Schema.of(
        Relation.of("R", a="int", b="int"),
        Relation.of("S", b="int", c="int"),
        Relation.of("T", c="int", a="int"),
    )
    parts = {}
    for name, cols in (("R", "a b"), ("S", "b c"), ("T", "c a")):
        rows = [(key, x, y, m) for (x, y), m in data[name].items()]
        parts[name] = [
            spark.createDataFrame(
                rows, f"{KEY} string, {cols.split()[0]} long, {cols.split()[1]} long, {MULT} long"
            )
        ]
    return net_bags(parts, schema)


@pytest.mark.parametrize("eps", ["0", "1/4", "1/3", "1/2", "2/3", "1"])
def test_spark_build_equals_engine_build_relations(spark, eps):
    data = random_relations(7, 400, 25)
    engine = create_engine("relations", "ivm-eps", eps)
    engine.load(data)
    built = spark_build(
        spark, bags_of(spark, data), {"mode": "relations", "strategy": "ivm-eps", "epsilon": eps}
    )
    info = built["k"]
    assert info["N"] == engine.n
    assert info["q"] == engine.q
    for k, name in enumerate("RST"):
        assert info["thresholds"][name] == engine.thr[k]
        assert info["parts"][name]["h"] == engine.hf[k]
        assert info["parts"][name]["l"] == engine.lf[k]
        assert (
            info["views"][name] == {(x, z): v for x, row in engine.views[k].items() for z, v in row.items()}
            if engine.views[k] and isinstance(next(iter(engine.views[k].values())), dict)
            else info["views"][name] == dict(engine.views[k])
        )


def test_bootstrap_then_stream_equals_streaming_everything(spark, broker, unique, tmp_path):
    from helpers import offline_results, rocksdb_snapshots, run_worker_to_end, spark_bootstrap, stream_config

    from ivmstream.events import read_source
    from ivmstream.runtime.produce import produce_records
    from ivmstream.state import open_store

    sample = (
        __import__("pathlib").Path(__file__).resolve().parents[2] / "services/triangles/data/sample.jsonl"
    )
    per_graph: dict[bytes, list[bytes]] = {}
    for line in sample.read_bytes().splitlines():
        per_graph.setdefault(line.split(b'"graph":')[1][:8], []).append(line)
    head, tail = tmp_path / "head.jsonl", tmp_path / "tail.jsonl"  # each graph: 70% snapshot, 30% stream
    head.write_bytes(b"".join(x + b"\n" for ls in per_graph.values() for x in ls[: len(ls) * 7 // 10]))
    tail.write_bytes(b"".join(x + b"\n" for ls in per_graph.values() for x in ls[len(ls) * 7 // 10 :]))
    topic, group = f"{unique}.updates", f"{unique}-g"
    broker.create_topic(topic, 2)
    cfg = stream_config(
        tmp_path / "c.json",
        unique,
        mode="graph",
        strategy="ivm-eps",
        epsilon="1/2",
        key_field="graph",
        checkpoint_interval=0.2,
    )
    service = load_service("triangles")
    config = load_config(service, cfg)
    state = tmp_path / "state"
    report = spark_bootstrap(
        spark, service, config, head, group=group, state_dir=state, bootstrap=broker.bootstrap
    )
    assert report.keys == 2
    # The bootstrapped engines answer exactly what the engine's own replay of the head answers.
    snaps = rocksdb_snapshots(
        group, state, topic, partitions=2, new_engine=lambda: service.engine(config.options)
    )
    head_results = offline_results(cfg, head, service="triangles")
    assert sorted(snaps) == sorted(head_results)  # every key bootstrapped, none left out
    for key, snap in snaps.items():
        engine = service.engine(config.options)
        engine.restore(snap)
        engine.check_invariants()
        assert engine.result()["count"] == head_results[key]["count"]
    produce_records(broker.bootstrap, topic, read_source(tail, key_field="graph"))
    results = run_worker_to_end(
        service, config, broker.bootstrap, open_store("rocksdb", group, state_dir=state), group
    )
    full = offline_results(cfg, sample, service="triangles")
    assert {k: (r["count"], r["triangles"]) for k, r in results.items()} == {
        k: (r["count"], r["triangles"]) for k, r in full.items()
    }
