"""The edge cases of docs/fivm/algorithm.md §2.12, one named test each, with expected values computed by
hand from the query's definition."""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.events import UpdateEvent as Ev
from ivmstream.services.fivm.engine import FivmEngine

PATH = {
    "relations": {
        "R": [{"a": "int"}, {"b": "int"}, "x"],
        "S": [{"b": "int"}, {"c": "str"}],
    },
    "ring": "sum",
    "sum": "x",
    "debug": True,
}
TRIANGLE = {
    "relations": {
        "R": [{"A": "int"}, {"B": "int"}],
        "S": [{"B": "int"}, {"C": "int"}],
        "T": [{"C": "int"}, {"A": "int"}],
    },
    "variable_order": {"A": {"B": {"C": {}}}},
    "indicators": True,
    "debug": True,
}


def r(a: int, b: int, x: float, m: int = 1) -> Ev:
    return Ev("R", {"a": a, "b": b, "x": x}, m)


def s(b: int, c: str, m: int = 1) -> Ev:
    return Ev("S", {"b": b, "c": c}, m)


def views(engine: FivmEngine) -> dict[str, dict[Any, Any]]:
    return {name: dict(v.data) for name, v in engine.maint.views.items()}


def test_a_payload_reaching_zero_leaves_the_view_and_every_index_and_comes_back() -> None:
    e = FivmEngine(dict(PATH, free=["c"]))
    e.apply([r(1, 7, 2.0), s(7, "u"), s(7, "v")])
    s_view = e.maint.views["S"]
    pos = s_view.keys.index("b")
    assert s_view.indexes == {(pos,): {(7,): {k: None for k in s_view.data}}}  # δR probes S by b
    e.apply([s(7, "u", -1), s(7, "v", -1)])
    assert s_view.data == {} and s_view.indexes == {(pos,): {}}
    assert e.result()["groups"] == []
    e.apply([s(7, "v")])
    assert s_view.indexes == {(pos,): {(7,): {k: None for k in s_view.data}}}
    assert e.result()["groups"] == [{"key": {"c": "v"}, "value": 2.0}]


def test_negative_payloads_from_deletes_of_absent_tuples_propagate() -> None:
    e = FivmEngine(PATH)
    assert e.apply([r(1, 7, 3.0, -1), s(7, "u", 2)]) == []  # a delete of an absent tuple is not refused
    assert e.result()["value"] == -6.0  # (-1 · 3) · 2
    t = FivmEngine(TRIANGLE)
    t.apply([Ev("R", {"A": 1, "B": 2}, -1), Ev("S", {"B": 2, "C": 3}, 1), Ev("T", {"C": 3, "A": 1}, 1)])
    assert t.maint.counts["I@C:R"] == {(1, 2): 1}  # a negative multiplicity still supports ∃R
    assert t.result()["value"] == -1


def test_duplicates_and_insert_delete_pairs_consolidate_and_a_net_zero_batch_is_a_noop() -> None:
    e = FivmEngine(TRIANGLE)
    e.apply([Ev("S", {"B": 2, "C": 3}, 1), Ev("T", {"C": 3, "A": 1}, 1)])
    e.changed_entries()
    before = e.snapshot()
    net_zero = [Ev("R", {"A": 1, "B": 2}, 1), Ev("R", {"A": 1, "B": 2}, 1), Ev("R", {"A": 1, "B": 2}, -2)]
    assert e.apply(net_zero) == []
    assert e.snapshot() == before
    assert {name for name, _, _ in e.changed_entries()} == {"@meta"}  # no view, support or count moved
    assert e.apply([Ev("R", {"A": 1, "B": 2}, 1), Ev("R", {"A": 1, "B": 2}, 1)]) == []
    assert e.result()["value"] == 2
    assert e.maint.supports["R"].data == {(1, 2): 2}


def test_an_empty_sibling_empties_the_join_but_stored_views_below_are_maintained() -> None:
    e = FivmEngine(PATH)
    e.apply([r(1, 7, 2.0), r(2, 7, 3.0), r(1, 8, 4.0)])
    assert e.result()["value"] == 0.0
    assert views(e)["R"] == {(7,): 5.0, (8,): 4.0}  # x summed out in the leaf, keyed by b
    e.apply([s(8, "u")])
    assert e.result()["value"] == 4.0


def test_an_empty_batch_is_a_noop_and_the_first_insert_flows_through_empty_views() -> None:
    e = FivmEngine(TRIANGLE)
    fresh = e.snapshot()
    assert e.apply([]) == []
    assert e.snapshot() == fresh
    assert e.result()["value"] == 0
    e.apply([Ev("T", {"C": 3, "A": 1}, 1)])
    assert views(e)["T"] == {(1, 3): 1}
    assert e.result()["value"] == 0


def test_a_relation_with_only_join_attributes_is_its_own_leaf_with_multiplicities() -> None:
    e = FivmEngine(TRIANGLE)
    e.apply([Ev("S", {"B": 2, "C": 3}, 3)])
    assert views(e)["S"] == {(2, 3): 3}


def test_variables_of_a_single_relation_are_summed_out_in_its_leaf() -> None:
    e = FivmEngine(PATH)
    e.apply([r(1, 7, 2.0), r(2, 7, 3.0, 2)])
    leaf = e.maint.tree.by_name()["R"]
    assert leaf.keys == ("b",) and set(leaf.composed) == {"a", "x"}
    assert views(e)["R"] == {(7,): 8.0}  # 2 + 2·3


def test_a_group_disappears_when_its_payload_becomes_zero() -> None:
    config = dict(PATH, free=["c"])
    e = FivmEngine(config)
    e.apply([r(1, 7, 2.0), s(7, "u"), s(7, "v")])
    assert e.result()["groups"] == [{"key": {"c": "u"}, "value": 2.0}, {"key": {"c": "v"}, "value": 2.0}]
    e.apply([s(7, "u", -1)])
    assert e.result()["groups"] == [{"key": {"c": "v"}, "value": 2.0}]
    e.apply([r(1, 7, 2.0, -1), r(3, 7, -2.0)])  # payload of b=7 changes sign but stays non-zero
    assert e.result()["groups"] == [{"key": {"c": "v"}, "value": -2.0}]
    e.apply([r(3, 7, -2.0, -1)])
    assert e.result()["groups"] == []


def test_a_cancelled_count_with_a_changed_sum_is_not_zero() -> None:
    """Delete (b=7, x=1) and insert (b=7, x=2) in one batch: the count of b=7 is unchanged, its sum is not."""
    e = FivmEngine(PATH)
    e.apply([r(1, 7, 1.0), s(7, "u")])
    e.apply([r(1, 7, 1.0, -1), r(1, 7, 2.0)])
    assert e.result()["value"] == 2.0


@pytest.mark.parametrize(
    ("row", "code"),
    [
        ({"a": None, "b": 7, "x": 1.0}, "null-value"),
        ({"a": 1, "b": None, "x": 1.0}, "null-value"),
        ({"a": 1, "b": 7, "x": None}, "null-value"),
        ({"a": 1.5, "b": 7, "x": 1.0}, "wrong-type"),
        ({"a": True, "b": 7, "x": 1.0}, "wrong-type"),
        ({"a": 1, "b": "7", "x": 1.0}, "wrong-type"),
        ({"a": 1, "b": 7, "x": "1"}, "wrong-type"),
        ({"a": 1, "b": 7, "x": float("nan")}, "non-finite-number"),
        ({"a": 1, "b": 7, "x": float("inf")}, "non-finite-number"),
        ({"a": 2**63, "b": 7, "x": 1.0}, "int-out-of-range"),
        ({"a": 1, "b": 7}, "missing-column"),
        ({"a": 1, "b": 7, "x": 1.0, "y": 2}, "unexpected-column"),
    ],
)
def test_bad_values_are_refused_with_a_reason_and_change_nothing(row: dict[str, Any], code: str) -> None:
    e = FivmEngine(PATH)
    e.apply([r(1, 7, 2.0), s(7, "u")])
    before = e.snapshot()
    (rej,) = e.apply([Ev("R", row, 1)])
    assert (rej.index, rej.code) == (0, code)
    assert e.snapshot() == before


@pytest.mark.parametrize(
    ("relation", "delta", "code"), [("Q", 1, "unknown-relation"), ("R", 0, "zero-delta")]
)
def test_unknown_relations_and_zero_deltas_are_refused(relation: str, delta: int, code: str) -> None:
    e = FivmEngine(PATH)
    (rej,) = e.apply([Ev(relation, {"a": 1, "b": 7, "x": 1.0}, delta)])
    assert rej.code == code


def test_an_alias_is_not_an_event_relation() -> None:
    e = FivmEngine(
        {"relations": {"E": [{"a": "int"}, {"b": "int"}], "F": {"alias_of": "E", "columns": ["b", "c"]}}}
    )
    (rej,) = e.apply([Ev("F", {"b": 1, "c": 2}, 1)])
    assert rej.code == "unknown-relation" and "alias of 'E'" in rej.detail


def test_float_join_keys_compare_by_their_canonical_value() -> None:
    config = {"relations": {"P": ["k", {"n": "int"}], "Q": ["k"]}}
    e = FivmEngine(config)
    e.apply(
        [
            Ev("P", {"k": -0.0, "n": 1}, 1),
            Ev("Q", {"k": 0.0}, 1),
            Ev("P", {"k": 2, "n": 1}, 1),
            Ev("Q", {"k": 2.0}, 1),
        ]
    )
    assert e.result()["value"] == 2  # -0.0 joins 0.0, the int 2 joins 2.0
    assert set(e.maint.views["Q"].data) == {(0.0,), (2.0,)}
    assert all(str(k[0]) != "-0.0" for k in e.maint.views["Q"].data)


def test_a_cartesian_product_multiplies_the_roots_of_the_forest() -> None:
    config = {
        "relations": {"R": [{"a": "int"}, "x"], "S": [{"b": "str"}]},
        "ring": "sum",
        "sum": "x",
        "free": ["b"],
        "debug": True,
    }
    e = FivmEngine(config)
    e.apply([Ev("R", {"a": 1, "x": 2.0}, 1), Ev("R", {"a": 2, "x": 3.0}, 1)])
    assert e.result()["groups"] == []  # S is empty
    e.apply([Ev("S", {"b": "p"}, 1), Ev("S", {"b": "q"}, 2)])
    assert e.result()["groups"] == [{"key": {"b": "p"}, "value": 5.0}, {"key": {"b": "q"}, "value": 10.0}]
    e.apply([Ev("R", {"a": 3, "x": 1.0}, -1)])  # a delta to one tree is multiplied by the other's root
    assert e.result()["groups"] == [{"key": {"b": "p"}, "value": 4.0}, {"key": {"b": "q"}, "value": 8.0}]


def test_deleting_everything_returns_to_the_empty_database() -> None:
    e = FivmEngine(TRIANGLE)
    edges = [
        ("R", {"A": 1, "B": 2}),
        ("S", {"B": 2, "C": 3}),
        ("T", {"C": 3, "A": 1}),
        ("R", {"A": 5, "B": 2}),
    ]
    e.apply([Ev(rel, row, 2) for rel, row in edges])
    assert e.result()["value"] == 8
    e.apply([Ev(rel, row, -2) for rel, row in reversed(edges)])
    assert e.result()["value"] == 0
    assert all(not v for v in e.maint.views.values())
    assert all(not s.data for s in e.maint.supports.values())
    assert all(not c for c in e.maint.counts.values())
    assert [name for name, _, _ in e.all_entries()] == ["@meta"] * 3  # config, phase, creation counters


def test_a_new_r_edge_enters_the_triangle_through_its_indicator_projection() -> None:
    """Inserting (a,b) into R contributes 0 on R's own path (V@C[a,b] was filtered out), then the
    indicator delta adds Σ_c S[b,c]·T[c,a] to V@C[a,b], which reaches the root times the new R[a,b]."""
    e = FivmEngine(TRIANGLE)
    e.apply(
        [
            Ev("S", {"B": 2, "C": 3}, 1),
            Ev("S", {"B": 2, "C": 4}, 1),
            Ev("T", {"C": 3, "A": 1}, 1),
            Ev("T", {"C": 4, "A": 1}, 1),
        ]
    )
    assert views(e)["V@C"] == {}  # no R tuple: ∃R filters every (a,b)
    e.apply([Ev("R", {"A": 1, "B": 2}, 3)])
    assert views(e)["V@C"] == {(1, 2): 2}
    assert e.result()["value"] == 6
    e.apply([Ev("R", {"A": 1, "B": 2}, -3)])
    assert views(e)["V@C"] == {} and e.result()["value"] == 0


@pytest.mark.parametrize("order", [None, {"house": {"price": {}, "x": {}}}])
def test_a_relation_named_like_one_of_its_variables_builds_and_joins(order: Any) -> None:
    """Relation ``house`` with column ``house``: relations and variables are separate name spaces."""
    config: dict[str, Any] = {
        "relations": {"house": {"house": "int", "price": "float"}, "shop": {"house": "int", "x": "float"}},
        "ring": "covariance",
        "features": ["price", "x"],
    }
    if order is not None:
        config["variable_order"] = order
    e = FivmEngine(config)
    e.apply([Ev("house", {"house": 1, "price": 2.0}, 1), Ev("shop", {"house": 1, "x": 3.0}, 1)])
    e.apply([Ev("shop", {"house": 1, "x": 4.0}, 1), Ev("house", {"house": 2, "price": 5.0}, 1)])
    value = e.result()["value"]
    assert (value["count"], value["sum"]) == (2, [4.0, 7.0])
    assert value["sumprod"][0][1] == 2.0 * 3.0 + 2.0 * 4.0
