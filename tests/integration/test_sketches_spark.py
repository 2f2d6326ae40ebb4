"""Spark side of the sketches service (docs/sketches/algorithm.md §8).

- ``recompute`` (the sketch captured with Spark SQL, the full query's answer, the rows a sketched scan
  reads) equals the engine's published result after replaying the same events: on random databases
  with deletes and duplicates, for each query shape, and on the bundled TPC-H demo.
- ``build_state`` gives each key the snapshot the replayed engine has, and its Spark capture agrees.
- A tampered sketch or answer is a difference.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from ivmstream.compare import diff
from ivmstream.config import load_config, schema_of
from ivmstream.events import read_source
from ivmstream.replay import replay_all
from ivmstream.service import load_service
from ivmstream.services.sketches.batch import build_state, comparable, recompute
from ivmstream.services.sketches.compiler import compile_query
from ivmstream.services.sketches.engine import SketchEngine
from ivmstream.services.sketches.service import DATA, DEMO_CONFIG
from ivmstream.spark.decode import net_bags
from ivmstream.spark.snapshot import read_snapshot
from tests.unit.sketches.sketches_oracle import SCHEMA

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("one_shuffle_partition")]

SERVICE = load_service("sketches")

SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "join-topk": (
        "SELECT r.a, SUM(s.d) AS t FROM r JOIN s ON r.a = s.a GROUP BY r.a ORDER BY t DESC LIMIT 2",
        {"r": "a", "s": "a"},
    ),
    "topk-spj": ("SELECT a, b, c FROM r ORDER BY b DESC, a LIMIT 3", {"r": "c"}),
    "distinct-topk": ("SELECT DISTINCT a FROM r ORDER BY a DESC LIMIT 3", {"r": "a"}),
    "scalar": ("SELECT COUNT(*), SUM(b) FROM r WHERE a > 2 HAVING COUNT(*) > 3", {"r": "b"}),
    "union": ("SELECT a, b FROM r WHERE b > 5 UNION ALL SELECT a, d FROM s WHERE d < 3", {"r": "a"}),
}


def random_events(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    stored: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(120):
        key = rng.choice(["k1", "k2"])
        table = rng.choice(sorted(SCHEMA))
        rows = stored.setdefault((key, table), [])
        if rows and rng.random() < 0.3:
            row = rows.pop(rng.randrange(len(rows)))
            events.append({"relation": table, "row": {**row, "region": key}, "delta": -1})
            continue
        row = {c: rng.randrange(10) for c in SCHEMA[table]}
        if table == "r" and rng.random() < 0.2:
            row["c"] = None
        rows.append(row)
        events.append({"relation": table, "row": {**row, "region": key}, "delta": 1})
    return events


def run_both(spark, tmp_path: Path, config_dict: dict[str, Any], events_path: Path):
    cpath = tmp_path / "c.json"
    cpath.write_text(json.dumps(config_dict))
    config = load_config(SERVICE, cpath)
    schema = schema_of(SERVICE, config)
    bags = net_bags({n: [df] for n, df in read_snapshot(spark, events_path, schema).items()}, schema)
    bags = {n: df.cache() for n, df in bags.items()}
    replayed = replay_all(SERVICE, config, read_source(events_path, key_field=config.key_field))
    engines: dict[str, SketchEngine] = replayed.engines  # type: ignore[assignment]
    return config, bags, engines


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_recompute_and_bootstrap_equal_the_replayed_engine(spark, tmp_path: Path, shape: str) -> None:
    sql, parts = SHAPES[shape]
    rng = random.Random(shape)
    partition = {
        t: {"column": c, "boundaries": sorted(rng.sample(range(1, 10), 3))} for t, c in parts.items()
    }
    flags = {"monotone_aggregates": True} if shape == "scalar" else {}  # COUNT(*) > c: S4
    path = tmp_path / "events.jsonl"
    tables = set(compile_query(sql, SCHEMA, {}).tables)
    events = [e for e in random_events(len(shape)) if e["relation"] in tables]
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    config = {"query": sql, "relations": SCHEMA, "partition": partition, "key_field": "region", **flags}
    cfg, bags, engines = run_both(spark, tmp_path, config, path)
    expected = recompute(spark, bags, cfg.options)
    assert set(expected) == set(engines)
    for key, engine in engines.items():
        assert diff(expected[key], comparable(engine.result())) == []
    built = dict(build_state(spark, bags, cfg.options))
    assert {k: v for k, v in built.items()} == {k: e.snapshot() for k, e in engines.items()}


def test_demo_reconciles_and_a_tampered_result_differs(spark, tmp_path: Path) -> None:
    cfg, bags, engines = run_both(spark, tmp_path, DEMO_CONFIG, DATA / "tpch_demo.jsonl")
    expected = recompute(spark, bags, cfg.options)
    for key, engine in engines.items():
        published = comparable(engine.result())
        assert diff(expected[key], published) == []
        assert published["sketch"]["lineitem"], "the demo's sketch should not be empty"
        tampered = {**published, "sketch": {"lineitem": published["sketch"]["lineitem"][1:]}}
        assert diff(expected[key], tampered) != []
        wrong = {**published, "answer": published["answer"][1:]}
        assert diff(expected[key], wrong) != []
