"""One fivm query over shards (services/fivm/sharding.py): the ring sum of the shards' partial roots,
each shard fed its slice of the sharded relations and every broadcast event in any interleaving and
batching, equals one engine fed everything (and, for counts, a brute-force join); configurations
whose shards would not add up are refused."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ivmstream.config import resolve_options
from ivmstream.events import Relation, UpdateEvent
from ivmstream.runtime.routing import ShardRouting
from ivmstream.services.fivm.engine import make_engine
from ivmstream.services.fivm.service import SERVICE
from ivmstream.services.fivm.sharding import check_shard_by, combine_partials, partial_result

# A Retailer-like snowflake sharded by its root variable locn: Census and Item lack locn (broadcast).
RELATIONS = {
    "Inventory": [{"locn": "int"}, {"ksn": "int"}, {"units": "int"}],
    "Location": [{"locn": "int"}, {"zip": "int"}],
    "Census": [{"zip": "int"}, {"pop": "int"}],
    "Item": [{"ksn": "int"}, {"price": "int"}],
}
ORDER: dict[str, Any] = {"locn": {"zip": {"pop": {}}, "ksn": {"units": {}, "price": {}}}}
DOMAINS = {"locn": 5, "ksn": 3, "units": 4, "zip": 3, "pop": 3, "price": 3}

QUERIES: dict[str, dict[str, Any]] = {
    "count": {"ring": "count"},
    "sum": {"ring": "sum", "sum": ["units", "price"]},
    # groups merge across shards; a free variable sits above the bound ones, so the order is derived
    "count-by-zip": {"ring": "count", "free": ["zip"], "variable_order": None},
    "sum-by-locn": {"ring": "sum", "sum": ["units"], "free": ["locn"]},  # groups split by shard
    "covariance": {
        "ring": "covariance",
        "features": ["units", "price", "pop"],
        "decimals": 2,
        "model": {"label": "price", "ridge": 1.0},
    },
    "factorized": {"ring": "factorized", "free": ["ksn", "zip"], "variable_order": None},
    "listing": {
        "ring": "listing",
        "free": ["ksn", "zip"],
        "ring_options": {"rows": True},
        "variable_order": None,
    },
}


def options(name: str) -> dict[str, Any]:
    return resolve_options(SERVICE, {"relations": RELATIONS, "variable_order": ORDER, **QUERIES[name]})


def routing(shards: int) -> ShardRouting:
    rels = [
        Relation(n, tuple((c, t) for col in cols for c, t in col.items())) for n, cols in RELATIONS.items()
    ]
    return ShardRouting(rels, "locn", shards, "in", "in.broadcast")


@st.composite
def events(draw: st.DrawFn) -> list[UpdateEvent]:
    """Inserts, deletes of present and absent tuples, repeats: small domains make joins dense."""
    out = []
    for _ in range(draw(st.integers(0, 40))):
        rel = draw(st.sampled_from(sorted(RELATIONS)))
        row = {c: draw(st.integers(0, DOMAINS[c] - 1)) for col in RELATIONS[rel] for c in col}
        out.append(UpdateEvent(rel, row, draw(st.sampled_from([1, 1, 2, -1, -2]))))
    return out


def without_stats(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "stats"}


def sharded_result(name: str, evs: list[UpdateEvent], shards: int, seed: int) -> dict[str, Any]:
    """Route each event as the producer does; each shard applies its slice and the broadcast events,
    interleaved and cut into batches at random; the partial roots are then combined."""
    rng = random.Random(seed)
    route = routing(shards)
    broadcast = [ev for ev in evs if ev.relation in route.broadcast]
    partials = []
    for shard in range(shards):
        mine = [ev for ev in evs if ev.relation in route.sharded and route.misplaced_input(ev, shard) is None]
        merged, a, b = [], list(mine), list(broadcast)
        while a or b:
            merged.append((a if a and (not b or rng.random() < 0.5) else b).pop(0))
        engine = make_engine(options(name))
        while merged:
            cut = rng.randint(1, len(merged))
            engine.apply(merged[:cut])
            merged = merged[cut:]
        partials.append(partial_result(engine))
    rng.shuffle(partials)  # the coordinator sums them in any order
    return combine_partials(options(name), partials)


def _ev(relation: str, *values: int, delta: int = 1) -> UpdateEvent:
    columns = [c for col in RELATIONS[relation] for c in col]
    return UpdateEvent(relation, dict(zip(columns, values, strict=True)), delta)


# Shard sums that cancel to an empty listing and one engine's never-filled root: the same empty result,
# columns included.
CANCELLING_SHARDS = [
    _ev("Location", 1, 1),
    *[_ev("Census", 0, 0)] * 2,
    _ev("Inventory", 0, 2, 0, delta=-1),
    *[_ev("Census", 0, 0)] * 2,
    _ev("Census", 1, 0),
    _ev("Inventory", 1, 2, 0),
    *[_ev("Census", 0, 0)] * 10,
    _ev("Item", 2, 0),
    *[_ev("Census", 0, 0)] * 3,
    _ev("Location", 0, 1),
    *[_ev("Census", 0, 0)] * 3,
]


@pytest.mark.parametrize("name", sorted(QUERIES))
@given(evs=events(), shards=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
@example(evs=CANCELLING_SHARDS, shards=2, seed=0)
@settings(max_examples=40)
def test_sum_of_shards_equals_one_engine(name, evs, shards, seed):
    whole = make_engine(options(name))
    whole.apply(evs)
    got = sharded_result(name, evs, shards, seed)
    assert without_stats(got) == without_stats(whole.result())
    assert got["stats"]["shards"] == shards


def brute_force_count(evs: list[UpdateEvent]) -> int:
    """Σ over the natural join of the Z-relations of the product of multiplicities."""
    bags: dict[str, Counter[tuple[int, ...]]] = {r: Counter() for r in RELATIONS}
    for ev in evs:
        bags[ev.relation][tuple(ev.row[c] for col in RELATIONS[ev.relation] for c in col)] += ev.delta
    total = 0
    for (i, im), (lo, lm), (ce, cm), (it, tm) in itertools.product(
        *(list(bags[r].items()) for r in ("Inventory", "Location", "Census", "Item"))
    ):
        if i[0] == lo[0] and lo[1] == ce[0] and i[1] == it[0]:
            total += im * lm * cm * tm
    return total


@given(evs=events(), shards=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=40)
def test_sharded_count_equals_brute_force_join(evs, shards, seed):
    assert sharded_result("count", evs, shards, seed)["value"] == brute_force_count(evs)


def test_no_partials_is_the_empty_database():
    for name in QUERIES:
        assert without_stats(combine_partials(options(name), [])) == without_stats(
            make_engine(options(name)).result()
        )


@pytest.mark.parametrize(
    ("given_options", "shard_by", "reason"),
    [
        ({"updatable": ["Inventory", "Location"]}, "locn", "static relations"),
        ({}, "nope", "variable of no relation"),
        (
            {
                "relations": {
                    "E": [{"a": "int"}, {"b": "int"}],
                    "E2": {"alias_of": "E", "columns": ["b", "a"]},
                },
                "variable_order": None,
            },
            "a",
            "renamed",
        ),
    ],
)
def test_refused_shardings(given_options, shard_by, reason):
    opts = resolve_options(SERVICE, {"relations": RELATIONS, "variable_order": ORDER, **given_options})
    with pytest.raises(ValueError, match=reason):
        check_shard_by(opts, shard_by)


def test_accepted_sharding_by_root_and_by_another_variable():
    opts = options("count")
    check_shard_by(opts, "locn")
    check_shard_by(opts, "ksn")  # correct too, only less local: Location and Census are then broadcast
