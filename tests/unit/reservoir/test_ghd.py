"""Decompositions derived for cyclic joins (docs/reservoir/algorithm.md §4.1): each cycle's aliases in
one bag. The derived bags of the dumbbell are its two triangles and the bridge, they give the join the
nested loops give, and the reservoir over them is uniform (χ² as in test_uniformity: fixed seeds,
p < 1e-4). The invariants over random streams run on a derived 4-cycle in test_invariants."""

from __future__ import annotations

import pytest

from ivmstream.services.reservoir.query import parse_query
from tests.unit.reservoir.oracle import CYCLE4, DUMBBELL, brute_join, engine, options
from tests.unit.reservoir.test_uniformity import assert_uniform, dumbbell_stream

DERIVED = {"relations": DUMBBELL["relations"]}  # the dumbbell without its declared bags


def test_the_dumbbell_decomposes_into_its_triangles_and_the_bridge():
    q = parse_query(options(DERIVED))
    assert q.derived == "ghd"
    assert sorted(sorted(n.members) for n in q.nodes) == sorted(sorted(b) for b in DUMBBELL["bags"])
    four = parse_query(options(CYCLE4))
    assert [n.members for n in four.nodes] == [("R", "S", "T", "U"), ("V",)]
    report = engine(DERIVED).result()["stats"]["decomposition"]
    assert report["derived"] == "ghd" and len(report["bags"]) == 3


@pytest.mark.parametrize("strategy", ["rsjoin", "sjoin", "symhj"])
def test_derived_bags_give_the_join_and_the_sample_of_the_declared_ones(strategy: str):
    derived, declared = engine(DERIVED, k=3, strategy=strategy), engine(DUMBBELL, k=3, strategy=strategy)
    for ev in dumbbell_stream():
        derived.apply([ev])
        declared.apply([ev])
        join = brute_join(derived)
        assert set(derived.rows()) <= join and len(derived.rows()) == min(3, len(join))
        assert derived.join_size_bound() >= len(join)
    assert derived._exact().count == declared._exact().count == len(brute_join(declared))


def test_the_dumbbell_over_derived_bags_is_uniform():
    stream = dumbbell_stream()  # the bridge edges come last: 6 results after 20 events, 8 after 21
    assert_uniform(DERIVED, stream, k=2, trials=600, checkpoints=[len(stream) - 1, len(stream)])
