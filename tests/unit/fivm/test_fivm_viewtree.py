"""View trees, μ and trigger indexes on the worked examples of docs/fivm/algorithm.md (the paper's
running example, Example 1.1, Retailer, Housing, the Twitter triangle and the matrix chain): the view
counts, key schemas, materialized sets and indexes stated there, and the running example's numbers."""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.order import build_order
from ivmstream.services.fivm.query import parse_query
from ivmstream.services.fivm.triggers import INDEX, compile_plans
from ivmstream.services.fivm.viewtree import ViewTree, build_view_tree, materialized

RUNNING = {
    "relations": {
        "R": [{"A": "str"}, {"B": "str"}],
        "S": [{"A": "str"}, {"C": "str"}, {"E": "str"}],
        "T": [{"C": "str"}, {"D": "str"}],
    },
    "variable_order": {"A": {"B": {}, "C": {"D": {}, "E": {}}}},
}
RETAILER = {
    "relations": {
        "Inventory": [{"locn": "int"}, {"dateid": "int"}, {"ksn": "int"}, "inventoryunits"],
        "Item": [{"ksn": "int"}, "subcategory", "category", "categoryCluster", "prize"],
        "Weather": [{"locn": "int"}, {"dateid": "int"}, "rain", "snow", "maxtemp"],
        "Location": [{"locn": "int"}, {"zip": "int"}, "rgn_cd", "avghhi"],
        "Census": [{"zip": "int"}, "population", "white", "medianage"],
    },
    "ring": "sum",
    "sum": "inventoryunits",
    "variable_order": {"locn": {"dateid": {"ksn": {}}, "zip": {}}},
}
HOUSING_RELATIONS = {
    "House": ["postcode", "livingarea", "price"],
    "Shop": ["postcode", "openinghoursshop", {"tesco": "int"}],
    "Institution": ["postcode", "typeeducation"],
    "Restaurant": ["postcode", "pricerangerest"],
    "Demographics": ["postcode", "averagesalary"],
    "Transport": ["postcode", "nbbuslines"],
}
TWITTER = {
    "relations": {
        "R": [{"A": "int"}, {"B": "int"}],
        "S": [{"B": "int"}, {"C": "int"}],
        "T": [{"C": "int"}, {"A": "int"}],
    },
    "variable_order": {"A": {"B": {"C": {}}}},
}
MATRIX_CHAIN = {
    "relations": {
        "A1": [{"I": "int"}, {"J": "int"}, "a1"],
        "A2": [{"J": "int"}, {"K": "int"}, "a2"],
        "A3": [{"K": "int"}, {"L": "int"}, "a3"],
    },
    "ring": "sum",
    "sum": ["a1", "a2", "a3"],
    "free": ["I", "L"],
    "variable_order": {"I": {"L": {"K": {"J": {}}}}},
}


def tree_of(config: dict[str, Any]) -> tuple[ViewTree, Any]:
    q = parse_query(config)
    return build_view_tree(q, build_order(q)), q


def schemas(tree: ViewTree) -> dict[str, set[str]]:
    return {n.name: set(n.keys) for n in tree.nodes()}


def mu(config: dict[str, Any], updatable: set[str]) -> set[str]:
    tree, q = tree_of(config)
    return set(materialized(tree, {o.name for o in q.occurrences if o.base in updatable}))


def test_running_example_views_and_keys() -> None:
    tree, _ = tree_of(RUNNING)
    assert schemas(tree) == {
        "V@A": set(),
        "R": {"A"},  # V_R@B: B is private to R, composed into the leaf
        "V@C": {"A"},
        "T": {"C"},  # V_T@D
        "S": {"A", "C"},  # V_S@E
    }


@pytest.mark.parametrize(
    ("updatable", "stored"),
    [
        ({"T"}, {"V@A", "S", "R"}),  # root, V_S@E, V_R@B (Example 4.2)
        ({"R", "S", "T"}, {"V@A", "S", "R", "V@C", "T"}),
        (set(), {"V@A"}),
    ],
)
def test_running_example_materialization(updatable: set[str], stored: set[str]) -> None:
    assert mu(RUNNING, updatable) == stored


@pytest.mark.parametrize(
    ("updatable", "stored"),
    [
        ({"R", "S", "T"}, {"V@A", "R", "V@C", "T", "S"}),
        ({"R"}, {"V@A", "V@C"}),
        ({"S"}, {"V@A", "R", "T"}),
        ({"T"}, {"V@A", "R", "S"}),
    ],
)
def test_example_1_1_free_a_and_c_materialization(updatable: set[str], stored: set[str]) -> None:
    config = dict(RUNNING, free=["A", "C"])
    assert mu(config, updatable) == stored


def test_retailer_sum_has_the_nine_views_with_their_keys() -> None:
    tree, q = tree_of(RETAILER)
    assert schemas(tree) == {
        "Inventory": {"locn", "dateid", "ksn"},
        "Item": {"ksn"},
        "Weather": {"locn", "dateid"},
        "Location": {"locn", "zip"},
        "Census": {"zip"},
        "V@ksn": {"locn", "dateid"},  # InIt
        "V@dateid": {"locn"},  # InItW
        "V@zip": {"locn"},  # LC
        "V@locn": set(),  # root
    }
    assert tree.lifted == ("inventoryunits",)
    assert len(mu(RETAILER, {r.name for r in q.relations})) == 9


def test_retailer_one_stores_root_lc_weather_and_item_only() -> None:
    assert mu(RETAILER, {"Inventory"}) == {"V@locn", "V@zip", "Weather", "Item"}


def test_housing_star_has_seven_views() -> None:
    tree, _ = tree_of({"relations": HOUSING_RELATIONS, "ring": "sum", "sum": "price"})
    assert {n.name: set(n.keys) for n in tree.nodes()} == {
        "V@postcode": set(),
        **{r: {"postcode"} for r in HOUSING_RELATIONS},
    }
    assert len(mu({"relations": HOUSING_RELATIONS}, set(HOUSING_RELATIONS))) == 7


@pytest.mark.parametrize(
    ("updatable", "stored"),
    [({"R", "S", "T"}, {"V@A", "R", "S", "T", "V@C"}), ({"R"}, {"V@A", "V@C"})],
)
def test_twitter_triangle_materialization(updatable: set[str], stored: set[str]) -> None:
    assert mu(TWITTER, updatable) == stored


def test_triangle_indicator_projection_of_r_hangs_under_c() -> None:
    tree, _ = tree_of(dict(TWITTER, indicators=True))
    by = tree.by_name()
    assert [c.name for c in by["V@C"].children] == ["S", "T", "I@C:R"]
    assert set(by["I@C:R"].keys) == {"A", "B"}
    assert [n.name for n in tree.nodes() if n.kind == "indicator"] == ["I@C:R"]


def test_acyclic_queries_get_no_indicator_projections() -> None:
    for config in (RUNNING, RETAILER, {"relations": HOUSING_RELATIONS}):
        tree, _ = tree_of(dict(config, indicators=True))
        assert not [n for n in tree.nodes() if n.kind == "indicator"]


def test_matrix_chain_stores_a1_a3_and_the_root_for_updates_to_a2() -> None:
    tree, _ = tree_of(MATRIX_CHAIN)
    # I and L are free: their views would equal the view at K, which is stored once, as the root.
    assert [r.name for r in tree.roots] == ["V@K"]
    assert schemas(tree) == {
        "V@K": {"I", "L"},
        "V@J": {"I", "K"},
        "A1": {"I", "J"},
        "A2": {"J", "K"},
        "A3": {"K", "L"},
    }
    assert mu(MATRIX_CHAIN, {"A2"}) == {"V@K", "A1", "A3"}


def indexes(config: dict[str, Any], relation: str) -> set[tuple[str, tuple[str, ...]]]:
    tree, q = tree_of(config)
    by = tree.by_name()
    out = set()
    for plan in compile_plans(tree, q)[relation]:
        for step in plan.steps:
            for probe in step.probes:
                if probe.mode == INDEX:
                    out.add((probe.view, tuple(by[probe.view].keys[i] for i in probe.index)))
    return out


def test_trigger_indexes_of_the_worked_examples() -> None:
    assert indexes(RUNNING, "T") == {("S", ("C",))}
    assert indexes(RUNNING, "R") == set()  # every step a point lookup
    assert indexes(RUNNING, "S") == set()
    assert ("Inventory", ("ksn",)) in indexes(RETAILER, "Item")
    assert ("Location", ("zip",)) in indexes(RETAILER, "Census")
    assert indexes(RETAILER, "Inventory") == set()  # O(1) per Inventory tuple
    assert indexes(TWITTER, "S") == {("T", ("C",))}
    assert indexes(TWITTER, "T") == {("S", ("C",))}


def running_db() -> list[UpdateEvent]:
    r = [("a1", "b1"), ("a1", "b2"), ("a2", "b3")]
    s = [("a1", "c1", "e1"), ("a1", "c1", "e2"), ("a1", "c2", "e3"), ("a2", "c2", "e4")]
    t = [("c1", "d1"), ("c2", "d2"), ("c2", "d3"), ("c3", "d4")]
    return (
        [UpdateEvent("R", {"A": a, "B": b}, 1) for a, b in r]
        + [UpdateEvent("S", {"A": a, "C": c, "E": e}, 1) for a, c, e in s]
        + [UpdateEvent("T", {"C": c, "D": d}, 1) for c, d in t]
    )


def test_running_example_numbers_and_example_4_1_delta() -> None:
    engine = FivmEngine(RUNNING)
    assert engine.apply(running_db()) == []
    views = {name: dict(v.data) for name, v in engine.maint.views.items()}
    assert engine.result()["value"] == 10
    assert views["T"] == {("c1",): 1, ("c2",): 2, ("c3",): 1}  # V_T@D
    assert views["V@C"] == {("a1",): 4, ("a2",): 2}  # V_ST@C
    assert views["R"] == {("a1",): 2, ("a2",): 1}  # V_R@B
    assert (
        engine.apply(
            [UpdateEvent("T", {"C": "c1", "D": "d1"}, -1), UpdateEvent("T", {"C": "c2", "D": "d2"}, 3)]
        )
        == []
    )
    after = dict(engine.maint.views["V@C"].data)
    assert {k: after[k] - views["V@C"][k] for k in after} == {("a1",): 1, ("a2",): 3}  # δV_ST@C
    assert engine.result()["value"] == 15
