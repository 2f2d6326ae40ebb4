"""The firstorder engines (first-order delta queries and the recompute baseline) against a brute-force
evaluation after every update: randomized inserts, deletes, duplicates (deltas of ±k), deletes of absent
tuples (refused, changing nothing) and values on both sides of the predicates' thresholds. The oracle
evaluates each query by nested loops over the multisets, with the predicate and the aggregates written
as Python functions here, not in the engine's expression language."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.options import ConfigError
from ivmstream.service import load_service
from ivmstream.services.firstorder.engine import make_engine

Env = dict[str, Any]


@dataclass
class Case:
    config: dict[str, Any]
    predicate: Callable[[Env], bool]
    aggregates: dict[str, Callable[[Env], Any]]
    domains: dict[str, dict[str, list[Any]]]  # relation -> column -> values drawn


def _div(a: Any, b: Any) -> Any:
    return None if b == 0 else a / b


CASES = {
    # axfinder's form: an equi-join on the broker, a disjunction of price gaps across the relations
    "gap": Case(
        {
            "relations": {
                "r": {"b": "int", "p": "float", "v": "int"},
                "s": {"b": "int", "q": "float", "w": "int"},
            },
            "predicate": "q - p > 3 or p - q > 3",
            "free": ["b"],
            "aggregates": {"spread": "w - v", "pw": "p * w"},
        },
        lambda e: e["q"] - e["p"] > 3 or e["p"] - e["q"] > 3,
        {"spread": lambda e: e["w"] - e["v"], "pw": lambda e: e["p"] * e["w"]},
        {
            "r": {"b": [0, 1], "p": [0.0, 2.0, 3.0, 4.0, 7.5], "v": [1, 2, 5]},
            "s": {"b": [0, 1], "q": [0.0, 3.0, 4.0, 7.0], "w": [1, 3]},
        },
    ),
    # brokerspread's form: a self-join's two occurrences (fed as two relations), an inequality on time
    "later": Case(
        {
            "relations": {
                "x": {"b": "int", "t": "int", "v": "float"},
                "y": {"b": "int", "y_t": "int", "y_v": "float"},
            },
            "predicate": "t > y_t",
            "free": "b",
            "aggregates": {"bsp": "t * v - y_t * y_v"},
        },
        lambda e: e["t"] > e["y_t"],
        {"bsp": lambda e: e["t"] * e["v"] - e["y_t"] * e["y_v"]},
        {
            "x": {"b": [0, 1, 2], "t": [1, 2, 3], "v": [0.5, 2.0]},
            "y": {"b": [0, 1, 2], "y_t": [1, 2, 3], "y_v": [0.5, 2.0]},
        },
    ),
    # three relations, one joined to nothing (scanned), a conjunction placed across probes, a division
    "three": Case(
        {
            "relations": {"r": {"a": "int", "x": "int"}, "s": {"a": "int", "y": "int"}, "t": {"z": "int"}},
            "predicate": "x < z and y != z and (x + y) in (1, 2, 3, 4)",
            "aggregates": {"e": "x + y * z", "d": "x / y", "m": "max(x, z) if y > 0 else -1"},
        },
        lambda e: e["x"] < e["z"] and e["y"] != e["z"] and e["x"] + e["y"] in (1, 2, 3, 4),
        {
            "e": lambda e: e["x"] + e["y"] * e["z"],
            "d": lambda e: _div(e["x"], e["y"]),
            "m": lambda e: max(e["x"], e["z"]) if e["y"] > 0 else -1,
        },
        {"r": {"a": [0, 1], "x": [0, 1, 2]}, "s": {"a": [0, 1], "y": [0, 1, 2]}, "t": {"z": [1, 2, 3]}},
    ),
}


def brute_force(case: Case, bags: dict[str, Counter[tuple[Any, ...]]]) -> dict[tuple[Any, ...], list[Any]]:
    relations = case.config["relations"]
    free = case.config.get("free") or []
    free = [free] if isinstance(free, str) else free
    names = list(relations)
    out: dict[tuple[Any, ...], list[Any]] = {}
    for combo in itertools.product(*(list(bags[r].items()) for r in names)):
        env: Env = {}
        mult = 1
        consistent = True
        for rel, (tup, m) in zip(names, combo, strict=True):
            for col, value in zip(relations[rel], tup, strict=True):
                if col in env and env[col] != value:
                    consistent = False
                env[col] = value
            mult *= m
        if not consistent or not case.predicate(env):
            continue
        key = tuple(env[v] for v in free)
        acc = out.setdefault(key, [0] + [0] * len(case.aggregates))
        acc[0] += mult
        for i, f in enumerate(case.aggregates.values(), 1):
            v = f(env)
            if v is not None:
                acc[i] += mult * v
    return {k: a for k, a in out.items() if a[0]}


def _engine(case: Case, strategy: str) -> Any:
    service = load_service("firstorder")
    return make_engine(build_config(service, {**case.config, "strategy": strategy}).options)


def _as_groups(result: dict[str, Any], case: Case) -> dict[tuple[Any, ...], list[Any]]:
    return {
        tuple(g["key"].values()): [g["count"], *(g["sums"][n] for n in case.aggregates)]
        for g in result["groups"]
    }


def _close(got: dict[Any, list[Any]], want: dict[Any, list[Any]]) -> bool:
    return got.keys() == want.keys() and all(
        g[0] == w[0]
        and all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) for a, b in zip(g[1:], w[1:], strict=True))
        for g, w in ((got[k], want[k]) for k in want)
    )


@st.composite
def streams(draw: st.DrawFn, case: Case) -> list[tuple[str, tuple[Any, ...], int]]:
    """Inserts (some of several copies), deletes of held tuples (some of several copies), and deletes
    of tuples that may be absent."""
    held: Counter[tuple[str, tuple[Any, ...]]] = Counter()
    out = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["insert", "insert", "insert", "delete", "delete", "absent"]))
        live = sorted(k for k, m in held.items() if m > 0)
        if kind == "delete" and live:
            rel, tup = draw(st.sampled_from(live))
            delta = -draw(st.integers(1, held[(rel, tup)]))
        else:
            rel = draw(st.sampled_from(sorted(case.domains)))
            tup = tuple(draw(st.sampled_from(vals)) for vals in case.domains[rel].values())
            delta = -1 if kind == "absent" else draw(st.sampled_from([1, 1, 2]))
        if held[(rel, tup)] + delta >= 0:
            held[(rel, tup)] += delta
        out.append((rel, tup, delta))
    return out


def _run(case: Case, stream: list[tuple[str, tuple[Any, ...], int]], strategy: str) -> None:
    engine = _engine(case, strategy)
    bags: dict[str, Counter[tuple[Any, ...]]] = {r: Counter() for r in case.config["relations"]}
    for i, (rel, tup, delta) in enumerate(stream):
        row = dict(zip(case.config["relations"][rel], tup, strict=True))
        refused = engine.apply([UpdateEvent(rel, row, delta)])
        if bags[rel][tup] + delta < 0:
            assert [r.code for r in refused] == ["absent-tuple"]
        else:
            assert refused == []
            bags[rel][tup] += delta
            bags[rel] = +bags[rel]
        assert _close(_as_groups(engine.result(), case), brute_force(case, bags)), (i, rel, tup, delta)
        if i % 7 == 3:  # a restored copy continues where the engine was
            copy = _engine(case, strategy)
            copy.restore(engine.snapshot())
            assert copy.result() == engine.result()
            engine = copy


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("strategy", ["first-order", "recompute"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_engine_equals_brute_force_after_every_update(name: str, strategy: str, data: st.DataObject) -> None:
    case = CASES[name]
    _run(case, data.draw(streams(case)), strategy)


def test_a_refused_delete_changes_nothing() -> None:
    case = CASES["gap"]
    engine = _engine(case, "first-order")
    engine.apply(
        [UpdateEvent("r", {"b": 0, "p": 0.0, "v": 1}, 1), UpdateEvent("s", {"b": 0, "q": 7.0, "w": 3}, 1)]
    )
    before = engine.snapshot()
    refused = engine.apply([UpdateEvent("s", {"b": 0, "q": 7.0, "w": 3}, -2)])
    assert [(r.index, r.code) for r in refused] == [(0, "absent-tuple")]
    assert engine.snapshot() == before


def test_the_delta_probes_by_index_and_counts_its_work() -> None:
    """An update visits only the other relation's tuples with its join key (the per-update bound)."""
    case = CASES["gap"]
    engine = _engine(case, "first-order")
    engine.apply([UpdateEvent("s", {"b": b, "q": float(i), "w": 1}, 1) for b in (0, 1) for i in range(10)])
    before = engine.stats()["visited"]
    engine.apply([UpdateEvent("r", {"b": 0, "p": 0.0, "v": 1}, 1)])
    assert engine.stats()["visited"] - before == 10  # the ten tuples of broker 0, not all twenty


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"predicate": "nope > 1"}, "'nope'"),
        ({"predicate": "__import__('os')"}, "'__import__'"),
        ({"aggregates": {"s": "p ** 2"}}, "outside the language"),
        ({"free": ["zz"]}, "free names ['zz']"),
        ({"relations": None}, "firstorder needs 'relations'"),
        ({"relations": {"r": {"b": "exact"}}}, "declare it float or int"),
        ({"predicate": "p in (1, q)"}, "tuple of constants"),
    ],
)
def test_configs_outside_the_language_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(load_service("firstorder"), {**CASES["gap"].config, **change})
    assert message in str(info.value)
