"""Equi-depth range partitions from a sample or a histogram: cut points are sample values, strictly
increasing, at most n - 1 of them, and every range holds less than a 1/n share of the sample besides
its last value (a heavy value is never split, so it may take several cut points with it)."""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.sketches.partition import equi_depth, parse_partition
from tests.unit.sketches.sketches_oracle import engine


@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 30)), min_size=1, max_size=60),
    st.integers(1, 40),
)
def test_each_range_holds_about_a_1_over_n_share(weighted: list[tuple[int, int]], n: int) -> None:
    cuts = equi_depth(n, weighted, "t")
    assert len(cuts) <= n - 1 and all(a < b for a, b in pairwise(cuts))
    counts: dict[int, int] = {}
    for v, c in weighted:
        counts[v] = counts.get(v, 0) + c
    assert set(cuts) <= set(counts)
    total = sum(counts.values())
    frags: dict[int, list[int]] = {}
    for v in sorted(counts):
        frags.setdefault(bisect_right(cuts, v), []).append(v)
    for values in frags.values():
        weight = sum(counts[v] for v in values)
        assert (weight - counts[values[-1]]) * n < total


def test_distinct_values_split_evenly_and_heavy_hitters_merge_cut_points() -> None:
    assert equi_depth(4, [(v, 1) for v in range(100)], "t") == [25, 50, 75]
    assert equi_depth(4, [(1, 90), (2, 5), (3, 5)], "t") == [2]  # value 1 holds three ranges' share
    assert equi_depth(1, [(v, 1) for v in range(10)], "t") == []


def test_partition_option_takes_a_sample_or_a_histogram() -> None:
    e = engine(
        "SELECT a, SUM(b) FROM r GROUP BY a", {"r": {"column": "a", "ranges": 2, "sample": [1, 2, 3, 4]}}
    )
    assert e.specs["r"].boundaries == (3,)
    e = engine(
        "SELECT a, SUM(b) FROM r GROUP BY a",
        {"r": {"column": "a", "ranges": 2, "histogram": [[1, 5], [7, 5]]}},
    )
    assert e.specs["r"].boundaries == (7,)


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"column": "a", "ranges": 2, "sample": []}, "non-empty"),
        ({"column": "a", "ranges": 2, "sample": [1, "x"]}, "mixes"),
        ({"column": "a", "ranges": 2, "sample": [1], "domain": [0, 9]}, "one of"),
        ({"column": "a", "ranges": 2, "histogram": [[1, -1]]}, "count >= 0"),
        ({"column": "a", "ranges": 2, "histogram": [[1, 0]]}, "counts nothing"),
        ({"column": "a", "ranges": 0, "sample": [1]}, "ranges must be"),
    ],
)
def test_bad_equi_depth_specs_name_the_problem(spec: dict, words: str) -> None:
    from ivmstream.services.sketches.catalog import Table

    with pytest.raises(ValueError, match=words):
        parse_partition({"r": spec}, {"r": Table("r", ("a",), ("a",), ("int",))}, {"r"})
