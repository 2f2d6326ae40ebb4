"""The firstorder service's Spark jobs: the state bootstrap builds from a snapshot's bags is the state
the engine reaches over the same events, and Spark SQL's recomputation of the query (the predicate and
aggregates translated to SQL) equals the engine's result, per key, on the demo's sample and on a query
with a scanned relation, IN, a division by zero, CASE and LEAST/GREATEST."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import orjson
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from ivmstream.compare import diff
from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.sdk.batch import KEY, MULT
from ivmstream.service import load_service
from ivmstream.services.firstorder.batch import JOBS
from ivmstream.services.firstorder.engine import make_engine
from ivmstream.services.firstorder.service import DATA, DEMO_CONFIG

pytestmark = pytest.mark.spark
TYPES = {"int": LongType(), "float": DoubleType(), "str": StringType()}

THREE = {
    "relations": {"r": {"a": "int", "x": "int"}, "s": {"a": "int", "y": "int"}, "t": {"z": "int"}},
    "predicate": "x < z and y != z and (x + y) in (1, 2, 3, 4)",
    "aggregates": {"e": "x + y * z", "d": "x / y", "m": "max(x, z) if y > 0 else -1"},
    "free": ["a"],
    "key_field": "k",
}


def _three_events() -> list[dict[str, Any]]:
    rng = random.Random(11)
    out: list[dict[str, Any]] = []
    for _ in range(120):
        rel = rng.choice(["r", "s", "t"])
        row: dict[str, Any] = {"k": rng.choice(["p", "q"])}
        if rel == "t":
            row["z"] = rng.randrange(1, 4)
        else:
            row.update({"a": rng.randrange(2), ("x" if rel == "r" else "y"): rng.randrange(3)})
        out.append({"relation": rel, "row": row, "delta": 1})
    return out


def _check(spark: Any, raw: dict[str, Any], events: list[dict[str, Any]]) -> None:
    config = build_config(load_service("firstorder"), raw)
    options, key_field = config.options, raw["key_field"]
    relations = options["relations"]
    engines: dict[str, Any] = {}
    bags: dict[str, Counter[tuple[Any, ...]]] = {r: Counter() for r in relations}
    for ev in events:
        key = ev["row"][key_field]
        cols = relations[ev["relation"]]
        row = {c: ev["row"][c] for c in cols}
        engine = engines.setdefault(key, make_engine(options))
        assert engine.apply([UpdateEvent(ev["relation"], row, ev["delta"])]) == []
        bags[ev["relation"]][(key, *row.values())] += ev["delta"]
    frames = {}
    for rel, cols in relations.items():
        fields = [StructField(c, TYPES[t]) for c, t in cols.items()]
        schema = StructType([StructField(KEY, StringType()), *fields, StructField(MULT, LongType())])
        frames[rel] = spark.createDataFrame([(*t, m) for t, m in bags[rel].items() if m], schema)
    built = dict(JOBS.build_state(spark, frames, options))
    assert built.keys() == engines.keys()
    for key, snap in built.items():
        restored = make_engine(options)
        restored.restore(snap)
        assert restored.result() == engines[key].result()
    expected = JOBS.recompute(spark, frames, options)
    for key, engine in engines.items():
        published = engine.result()
        assert published["groups"], key
        assert diff(expected.get(key, JOBS.empty(options)), published) == [], key


def test_bootstrap_and_recompute_equal_the_engine(spark: Any) -> None:
    demo = [orjson.loads(line) for line in (DATA / "sample.jsonl").read_bytes().splitlines()]
    _check(spark, DEMO_CONFIG, demo)
    _check(spark, THREE, _three_events())
