"""The relational ring lists the join it is evaluated over (docs/fivm/rings.md §4).

Query: Q(A, B, C, D) = R(A, B), S(A, C, E), T(C, D) with E bound, over the variable order
A -> {B -> R, C -> {D -> T, E -> S}}; the output variables in preorder are A, B, C, D.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.cofactor import BlockLayoutError
from ivmstream.services.fivm.rings.listing import Listing, ListingRing, make_listing_ring
from tests.unit.fivm.running_example import OUTPUT, brute_force, random_product, z_relation

SIGNED = st.integers(-2, 3).filter(bool)


def view_tree_root(ring, R, S, T, rnd):
    """The running example's view tree; each product's factors are multiplied in a random order."""

    def product(*factors):
        return random_product(ring, rnd, *factors)

    def marginalize(rel, key_of, lift_of):
        view = defaultdict(ring.zero)
        for t, m in rel.items():
            view[key_of(t)] = ring.add(view[key_of(t)], product(ring.scale(m, ring.one()), *lift_of(t)))
        return view

    v_r = marginalize(R, lambda t: t[0], lambda t: [ring.lift("B", t[1])])
    v_t = marginalize(T, lambda t: t[0], lambda t: [ring.lift("D", t[1])])
    v_s = marginalize(S, lambda t: (t[0], t[1]), lambda t: [ring.lift("E", t[2])])
    v_st = defaultdict(ring.zero)
    for (a, c), p in v_s.items():
        if c in v_t:
            v_st[a] = ring.add(v_st[a], product(ring.lift("C", c), v_t[c], p))
    root = ring.zero()
    for a in v_r.keys() & v_st.keys():
        root = ring.add(root, product(ring.lift("A", a), v_r[a], v_st[a]))
    return root


@settings(max_examples=200)
@given(z_relation(2, SIGNED), z_relation(3, SIGNED), z_relation(2, SIGNED), st.randoms(use_true_random=False))
def test_root_payload_lists_the_join_in_preorder_columns(R, S, T, rnd):
    ring = ListingRing(OUTPUT, rows=True)
    root = view_tree_root(ring, R, S, T, rnd)
    want = brute_force(R, S, T)
    assert {t: m for t, m in root.rows.items() if m} == want
    if want:
        assert ring.columns(root) == OUTPUT
    out = ring.to_json(root)
    assert out["join_size"] == sum(want.values()) and out["distinct"] == len(want)
    assert out["columns"] == OUTPUT  # with rows or without
    assert Counter({tuple(r[:-1]): r[-1] for r in out["rows"]}) == Counter(want)


def test_running_example_lists_ten_join_tuples():
    R = {("a1", "b1"): 1, ("a1", "b2"): 1, ("a2", "b3"): 1}
    S = {("a1", "c1", "e1"): 1, ("a1", "c1", "e2"): 1, ("a1", "c2", "e3"): 1, ("a2", "c2", "e4"): 1}
    T = {("c1", "d1"): 1, ("c2", "d2"): 1, ("c2", "d3"): 1, ("c3", "d4"): 1}
    ring = make_listing_ring(OUTPUT, rows=True)
    out = ring.to_json(view_tree_root(ring, R, S, T, random.Random(7)))
    assert out["join_size"] == 10
    assert out["rows"][0] == ["a1", "b1", "c1", "d1", 2]  # two E-values for (a1, c1)
    assert out["distinct"] == 8


def test_columns_follow_preorder_whatever_the_multiplication_order():
    ring = ListingRing(["a", "b", "c"])
    a, b, c = ring.lift("a", 1), ring.lift("b", 2), ring.lift("c", 3)
    for product in (ring.mul(ring.mul(c, a), b), ring.mul(b, ring.mul(c, a)), ring.mul(a, ring.mul(c, b))):
        assert product.schema == (0, 1, 2) and product.rows == {(1, 2, 3): 1}


def test_shared_columns_and_mismatched_unions_are_engine_errors():
    ring = ListingRing(["a", "b"])
    with pytest.raises(BlockLayoutError, match="share a column"):
        ring.mul(ring.lift("a", 1), ring.lift("a", 2))
    with pytest.raises(BlockLayoutError, match="different schemas"):
        ring.add(ring.lift("a", 1), ring.lift("b", 1))
    assert ring.add(ring.zero(), ring.lift("b", 1)) == ring.lift("b", 1)


def test_an_empty_result_reports_every_output_column_however_it_was_reached():
    ring = ListingRing(["a", "b"], rows=True)
    ab = ring.mul(ring.lift("a", 1), ring.lift("b", 2))
    cancelled = ring.add(ab, ring.neg(ab))  # keeps the schema (0, 1), has no row
    assert cancelled.schema == (0, 1) and ring.zero().schema == ()
    empty = {"join_size": 0, "distinct": 0, "columns": ["a", "b"], "rows": []}
    for zero in (ring.zero(), cancelled, ring.sum_all([ab, ring.neg(ab)]), ring.mul(ring.zero(), ab)):
        assert ring.to_json(zero) == empty
    assert ring.to_json(ab)["columns"] == ["a", "b"]


def test_bound_variables_lift_to_one_and_options_are_checked():
    ring = make_listing_ring(["a"])
    assert not ring.lifts("e") and ring.lift("e", 9) == ring.one()
    assert ring.to_json(ring.scale(3, ring.lift("a", "x"))) == {"join_size": 3, "distinct": 1}
    with pytest.raises(ValueError):
        make_listing_ring(["a"], row=True)


SCALARS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=3), st.floats())


@given(
    st.dictionaries(
        st.tuples(SCALARS, st.booleans()),
        st.integers(-(2**63), 2**63 - 1).filter(bool),
        max_size=5,
    )
)
def test_encoding_round_trips_scalar_values(rows):
    ring = ListingRing(["a", "b"])
    payload = Listing((0, 1), rows)
    back = ring.decode(ring.encode(payload))
    assert back.schema == (0, 1)
    assert msgspec.msgpack.encode(list(back.rows.items())) == msgspec.msgpack.encode(list(rows.items()))
