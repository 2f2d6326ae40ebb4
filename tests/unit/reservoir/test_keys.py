"""Declared keys and the foreign-key merge derived from them (docs/reservoir/algorithm.md §2.8): which
aliases merge, that the engine refuses inserts breaking a key (against a model of the relations), that
a merged bag never holds more tuples than its unmerged alias, and that the merged join samples
uniformly (χ² as in test_uniformity: fixed seeds, p < 1e-4)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.query import parse_query
from tests.unit.reservoir.oracle import FK_MERGE, Model, brute_join, engine, event, options
from tests.unit.reservoir.test_uniformity import assert_uniform

# a chain of foreign keys, as in the paper's Example 4.6: Fact → Mid (by m) → Dim (by d); Other also
# references Mid but Mid can join one bag only, so Other stays apart
CHAIN = {
    "relations": {
        "Fact": ["f", "m"],
        "Mid": ["m", "d"],
        "Dim": ["d", "x"],
        "Other": ["o", "m"],
    },
    "keys": {"Mid": ["m"], "Dim": ["d"]},
}


def members(query: dict[str, Any], **more: Any) -> list[tuple[str, ...]]:
    return [n.members for n in parse_query(options(query, **more)).nodes]


def test_the_opt_strategies_merge_each_keyed_alias_into_the_alias_referencing_it():
    assert members(FK_MERGE, strategy="rsjoin-opt") == [("Sales", "Item"), ("Cust",)]
    assert members(CHAIN, strategy="sjoin-opt") == [("Fact", "Mid", "Dim"), ("Other",)]
    assert parse_query(options(CHAIN, strategy="sjoin-opt")).derived == "fk-merge"
    # the other strategies only check the keys; declared bags win over the merge
    assert members(FK_MERGE, strategy="rsjoin") == [("Sales",), ("Item",), ("Cust",)]
    declared = {**FK_MERGE, "bags": [["Sales"], ["Item", "Cust"]]}
    assert members(declared, strategy="rsjoin-opt") == [("Sales",), ("Item", "Cust")]


def test_a_key_that_references_nothing_merges_nothing():
    unreferenced = {**FK_MERGE, "keys": {"Item": ["cat"]}}  # no neighbour holds cat
    assert members(unreferenced, strategy="rsjoin-opt") == [("Sales",), ("Item",), ("Cust",)]


@pytest.mark.parametrize(
    ("keys", "message"),
    [({"Nope": ["item"]}, "not one of the relations"), ({"Item": ["cust"]}, "not one of its columns")],
)
def test_a_key_on_unknown_names_is_a_config_error(keys: dict[str, list[str]], message: str):
    with pytest.raises(ValueError, match=message):
        parse_query(options({**FK_MERGE, "keys": keys}))


ROWS = {"Sales": ("item", "cust"), "Item": ("item", "cat"), "Cust": ("cust", "region")}


@st.composite
def keyed_streams(draw: Any) -> list[tuple[str, tuple[int, int], int]]:
    """Inserts over tiny domains (so Item keys clash often), repeats and deletes of earlier events."""
    out: list[tuple[str, tuple[int, int], int]] = []
    for _ in range(draw(st.integers(1, 50))):
        kind = draw(st.sampled_from(["insert"] * 5 + ["again", "delete"]))
        if kind != "insert" and out:
            rel, vals, _ = out[draw(st.integers(0, len(out) - 1))]
            out.append((rel, vals, -1 if kind == "delete" else 1))
            continue
        rel = draw(st.sampled_from(sorted(ROWS)))
        out.append((rel, (draw(st.integers(0, 2)), draw(st.integers(0, 3))), 1))
    return out


@pytest.mark.parametrize("strategy", ["rsjoin", "rsjoin-opt", "sjoin-opt", "symhj"])
@settings(max_examples=25, deadline=None)
@given(stream=keyed_streams(), k=st.sampled_from([1, 4]))
def test_key_violations_are_refused_and_merged_bags_stay_within_the_key_bound(
    strategy: str, stream: list[tuple[str, tuple[int, int], int]], k: int
):
    e = engine(FK_MERGE, k=k, strategy=strategy)
    model = Model(e)
    for rel, vals, delta in stream:
        want = model.apply(rel, vals, delta)
        refused = e.apply([event(rel, ROWS[rel], vals, delta)])
        assert [r.code for r in refused] == ([want] if want else [])
        assert {a: set(r) for a, r in e.rels.items()} == model.relations()
        for n, node in zip(e.query.nodes, e.index.nodes, strict=True):
            # each Sales tuple meets one Item tuple at most: a bag holds no more than its first alias
            assert len(node.tuples) <= len(e.rels[n.members[0]])
        join = brute_join(e)
        assert set(e.rows()) <= join and len(e.rows()) == min(k, len(join))


def test_a_refused_key_violation_changes_nothing():
    e = engine(FK_MERGE, k=2, strategy="rsjoin-opt")
    e.apply([event("Item", ROWS["Item"], (1, 7)), event("Sales", ROWS["Sales"], (1, 3))])
    before = e.snapshot()
    refused = e.apply([event("Item", ROWS["Item"], (1, 8))])
    assert [r.code for r in refused] == ["key-violation"] and "(1, 7)" in refused[0].detail
    assert e.snapshot() == before
    e.apply([event("Item", ROWS["Item"], (1, 7), -1)])
    assert e.apply([event("Item", ROWS["Item"], (1, 8))]) == []  # the key is free again


def test_bootstrap_refuses_relations_that_break_a_key():
    with pytest.raises(ValueError, match="break a declared key"):
        ReservoirEngine.bootstrap(options(FK_MERGE), {"Item": [(1, 7), (1, 8)], "Sales": [], "Cust": []})


def fk_stream() -> list[Any]:
    """Sales arriving before and after their Item (parked in the bag until it comes), skewed customers."""
    rng = random.Random(5)
    rows = [("Item", (i, i % 2)) for i in range(4)]
    rows += [("Sales", (rng.randrange(4), rng.choice([0, 0, 1]))) for _ in range(9)]
    rows += [("Cust", (c, r)) for c in range(2) for r in range(2)]
    rng.shuffle(rows)
    return [event(rel, ROWS[rel], vals) for rel, vals in rows]


@pytest.mark.parametrize("strategy", ["rsjoin-opt", "sjoin-opt"])
def test_the_merged_join_is_sampled_uniformly(strategy: str):
    stream = fk_stream()  # 6 results after 15 events, 12 after all 17
    assert_uniform(FK_MERGE, stream, k=2, trials=500, checkpoints=[15, len(stream)], strategy=strategy)
