"""What each baseline stores: the view counts of the paper's queries, and the refusals.

docs/fivm/baselines.md §3, §4, §6. The expected views come from the paper (Retailer SUM:
13 DBToaster views; Housing: the same 7 views as F-IVM; the triangle: the root, the three relations
and the three pairwise joins; 1-IVM with scalar payloads: one result per cofactor aggregate plus the
base relations, 990 + 5 for Retailer and 406 + 6 for Housing).
"""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.baselines.dbtoaster import DbtMaintainer
from ivmstream.services.fivm.baselines.variants import FactPayloadsMaintainer
from ivmstream.services.fivm.engine import FivmEngine

RETAILER = {
    "Inventory": ["locn", "dateid", "ksn", "inventoryunits"],
    "Item": ["ksn", "subcategory", "category", "categoryCluster", "prize"],
    "Weather": ["locn", "dateid", "rain", "snow", "maxtemp", "mintemp", "meanwind", "thunder"],
    "Location": [
        "locn", "zip", "rgn_cd", "clim_zn_nbr", "tot_area_sq_ft", "sell_area_sq_ft", "avghhi",
        "supertargetdistance", "supertargetdrivetime", "targetdistance", "targetdrivetime",
        "walmartdistance", "walmartdrivetime", "walmartsupercenterdistance", "walmartsupercenterdrivetime",
    ],
    "Census": [
        "zip", "population", "white", "asian", "pacific", "blackafrican", "medianage",
        "occupiedhouseunits", "houseunits", "families", "households", "husbwife", "males", "females",
        "householdschildren", "hispanic",
    ],
}  # fmt: skip
HOUSING = {
    "House": [
        "postcode", "livingarea", "price", "nbbedrooms", "nbbathrooms", "kitchensize", "house", "flat",
        "unknown", "garden", "parking",
    ],
    "Shop": ["postcode", "openinghoursshop", "pricerangeshop", "sainsburys", "tesco", "ms"],
    "Institution": ["postcode", "typeeducation", "sizeinstitution"],
    "Restaurant": ["postcode", "openinghoursrest", "pricerangerest"],
    "Demographics": ["postcode", "averagesalary", "crimesperyear", "unemployment", "nbhospitals"],
    "Transport": ["postcode", "nbbuslines", "nbtrainstations", "distancecitycentre"],
}  # fmt: skip
TRIANGLE = {"R": ["A", "B"], "S": ["B", "C"], "T": ["C", "A"]}


def every_variable(rels: dict[str, list[str]]) -> list[str]:
    return sorted({c for cols in rels.values() for c in cols})


def hierarchy(config: dict[str, Any]) -> set[frozenset[str]]:
    maint = FivmEngine(config).maint
    assert isinstance(maint, DbtMaintainer)
    return {frozenset(d.relations) for d in maint.hierarchy.defs.values()}


@pytest.mark.parametrize("strategy", ["dbt", "dbt-ring"])
def test_retailer_sum_has_the_papers_thirteen_dbtoaster_views(strategy: str) -> None:
    config = {"relations": RETAILER, "ring": "sum", "sum": "inventoryunits", "strategy": strategy}
    inv, it, w, loc, c = "Inventory", "Item", "Weather", "Location", "Census"
    want = {frozenset(s) for s in ([inv], [it], [w], [loc], [c], [loc, c])}
    want |= {frozenset([inv, *s]) for s in ([it], [it, w], [it, w, loc], [w], [w, loc], [w, loc, c])}
    want.add(frozenset(RETAILER))
    assert hierarchy(config) == want
    assert len(FivmEngine(config).result()["stats"]["views"]) == 13


@pytest.mark.parametrize("strategy", ["dbt", "dbt-ring", "fivm", "sql-opt"])
def test_housing_stores_seven_views(strategy: str) -> None:
    ring = {"ring": "covariance"} if strategy == "sql-opt" else {"ring": "sum", "sum": "price"}
    config = {"relations": HOUSING, "strategy": strategy, **ring}
    assert len(FivmEngine(config).result()["stats"]["views"]) == 7
    if strategy.startswith("dbt"):
        assert hierarchy(config) == {frozenset([r]) for r in HOUSING} | {frozenset(HOUSING)}


@pytest.mark.parametrize("strategy", ["dbt", "dbt-ring"])
def test_triangle_dbtoaster_views_are_the_relations_and_the_pairwise_joins(strategy: str) -> None:
    config = {"relations": TRIANGLE, "strategy": strategy}
    want = {frozenset(s) for s in (["R"], ["S"], ["T"], ["S", "T"], ["R", "S"], ["T", "R"], ["R", "S", "T"])}
    assert hierarchy(config) == want


def test_retailer_sql_opt_stores_fivms_nine_views() -> None:
    config = {"relations": RETAILER, "ring": "covariance", "features": every_variable(RETAILER)}
    fivm = FivmEngine(config).result()["stats"]["views"]
    assert FivmEngine(dict(config, strategy="sql-opt")).result()["stats"]["views"] == fivm
    assert len(fivm) == 9


@pytest.mark.parametrize(("rels", "aggregates"), [(RETAILER, 990), (HOUSING, 406)])
def test_first_order_scalar_stores_one_result_per_aggregate_and_the_relations(
    rels: dict[str, list[str]], aggregates: int
) -> None:
    config = {"relations": rels, "ring": "covariance", "features": every_variable(rels), "strategy": "1-ivm"}
    views = FivmEngine(config).result()["stats"]["views"]
    assert len(views) == aggregates + len(rels)
    assert set(rels) <= set(views)
    ring = FivmEngine(dict(config, strategy="1-ivm-ring")).result()["stats"]["views"]
    assert len(ring) == 1 + len(rels)


@pytest.mark.parametrize("rels", [RETAILER, HOUSING, TRIANGLE])
def test_scalar_dbtoaster_views_are_the_ring_hierarchy_once_per_restricted_aggregate(
    rels: dict[str, list[str]],
) -> None:
    """Scalar payloads give one hierarchy per aggregate; shared (S, K, f) are stored once, so the views
    cover exactly the ring hierarchy's (S, K) pairs, at most once per aggregate."""
    feats = every_variable(rels)[:6]
    config = {"relations": rels, "ring": "covariance", "features": feats}
    scalar = FivmEngine(dict(config, strategy="dbt")).maint
    ring = FivmEngine(dict(config, strategy="dbt-ring")).maint
    assert isinstance(scalar, DbtMaintainer) and isinstance(ring, DbtMaintainer)
    pairs = [(d.relations, d.keys) for d in scalar.hierarchy.defs.values()]
    assert set(pairs) == {(d.relations, d.keys) for d in ring.hierarchy.defs.values()}
    m = len(feats)
    assert len(pairs) > len(set(pairs))
    assert all(pairs.count(p) <= 1 + m + m * (m + 1) // 2 for p in set(pairs))


@pytest.mark.parametrize(
    ("strategy", "config", "match"),
    [
        ("1-ivm", {"ring": "count", "alias": True}, "self-joins"),
        ("dbt", {"ring": "count", "alias": True}, "self-joins"),
        ("dbt-ring", {"ring": "listing", "alias": True}, "self-joins"),
        ("1-ivm", {"ring": "listing"}, "computes rings"),
        ("sql-opt", {"ring": "count"}, "computes rings"),
        ("list-keys", {"ring": "count"}, "computes rings"),
        ("fact-payloads", {"ring": "sum", "sum": "b"}, "computes rings"),
        ("f-re", {"ring": "factorized"}, "computes rings"),
        ("reeval", {"ring": "matrix"}, "matrix chain"),
        ("dbt", {"ring": "count", "debug": True}, "debug"),
    ],
)
def test_unsupported_configurations_are_refused_in_one_line(
    strategy: str, config: dict[str, Any], match: str
) -> None:
    rels: dict[str, Any] = {"E": [{"a": "int"}, {"b": "int"}], "F": [{"b": "int"}, {"c": "int"}]}
    if config.pop("alias", False):
        rels["E2"] = {"alias_of": "E", "columns": ["b", "c"]}
    with pytest.raises(EngineError, match=match):
        FivmEngine({"relations": rels, "strategy": strategy, **config})


def test_fact_payloads_keep_a_wide_view_for_a_leaf_composing_several_output_variables() -> None:
    """S's private output variables d and e are composed into S's leaf, whose factorized payload keeps
    only d; the listing still has every (d, e) pair with its multiplicity."""
    rels = {"R": [{"a": "int"}, {"b": "int"}], "S": [{"a": "int"}, {"d": "int"}, {"e": "str"}]}
    config = {
        "relations": rels,
        "ring": "listing",
        "free": ["a", "b", "d", "e"],
        "ring_options": {"rows": True},
    }
    fact = FivmEngine(dict(config, strategy="fact-payloads"))
    assert isinstance(fact.maint, FactPayloadsMaintainer)
    assert "L@S" in fact.maint.views
    events = [
        UpdateEvent("R", {"a": 1, "b": 2}, 2),
        UpdateEvent("S", {"a": 1, "d": 3, "e": "x"}, 1),
        UpdateEvent("S", {"a": 1, "d": 3, "e": "y"}, 3),
    ]
    fivm = FivmEngine(config)
    assert fact.apply(events) == fivm.apply(events) == []
    assert fact.result()["value"] == fivm.result()["value"]
    value = fact.result()["value"]
    rows = [dict(zip(value["columns"], r[:-1], strict=True)) | {"m": r[-1]} for r in value["rows"]]
    named = sorted(rows, key=lambda row: row["e"])
    assert named == [{"a": 1, "b": 2, "d": 3, "e": "x", "m": 2}, {"a": 1, "b": 2, "d": 3, "e": "y", "m": 6}]
