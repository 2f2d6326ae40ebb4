"""Factorized payloads represent the join they are computed over (docs/fivm/rings.md §5).

Query: Q(A, B, C, D) = R(A, B), S(A, C, E), T(C, D) with E bound, over the variable order
A -> {B -> R, C -> {D -> T, E -> S}}; the output variables in preorder are A, B, C, D. Every view is
kept (the result is distributed over them); the enumeration below is the one §5.3 describes.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.cofactor import BlockLayoutError
from ivmstream.services.fivm.rings.factorized import (
    Factor,
    FactorizedRing,
    count,
    make_factorized_ring,
    values,
)
from tests.unit.fivm.running_example import OUTPUT, brute_force, random_product, z_relation


def view_tree(ring, R, S, T, rnd):
    """All views of the running example's tree; factors of each product in a random order."""

    def product(*factors):
        return random_product(ring, rnd, *factors)

    def group(items):
        view = defaultdict(ring.zero)
        for key, p in items:
            view[key] = ring.add(view[key], p)
        return {k: p for k, p in view.items() if not ring.is_zero(p)}

    v_r = group((a, product(ring.scale(m, ring.one()), ring.lift("B", b))) for (a, b), m in R.items())
    v_t = group((c, product(ring.scale(m, ring.one()), ring.lift("D", d))) for (c, d), m in T.items())
    v_s = group(((a, c), product(ring.scale(m, ring.one()), ring.lift("E", e))) for (a, c, e), m in S.items())
    v_st = group((a, product(ring.lift("C", c), v_t[c], p)) for (a, c), p in v_s.items() if c in v_t)
    root = group(((), product(ring.lift("A", a), v_r[a], v_st[a])) for a in v_r.keys() & v_st.keys())
    return {"R": v_r, "T": v_t, "S": v_s, "ST": v_st, "root": root.get((), ring.zero())}


def enumerate_join(views, R, T):
    """Walk the payloads top-down; multiplicities from the views directly above the relations."""
    out = Counter()
    for a, _ in values(views["root"]):
        for b, _ in values(views["R"].get(a, 0)):
            for c, _ in values(views["ST"].get(a, 0)):
                for d, _ in values(views["T"].get(c, 0)):
                    out[(a, b, c, d)] += R[(a, b)] * T[(c, d)] * count(views["S"].get((a, c), 0))
    return {t: m for t, m in out.items() if m}


POSITIVE = st.integers(1, 3)
SIGNED = st.integers(-2, 3).filter(bool)


@settings(max_examples=200)
@given(
    z_relation(2, POSITIVE),
    z_relation(3, POSITIVE),
    z_relation(2, POSITIVE),
    st.randoms(use_true_random=False),
)
def test_enumeration_of_the_distributed_payloads_equals_the_listing(R, S, T, rnd):
    views = view_tree(FactorizedRing(OUTPUT), R, S, T, rnd)
    want = brute_force(R, S, T)
    assert enumerate_join(views, R, T) == want
    assert count(views["root"]) == sum(want.values())


@settings(max_examples=200)
@given(z_relation(2, SIGNED), z_relation(3, SIGNED), z_relation(2, SIGNED), st.randoms(use_true_random=False))
def test_each_value_carries_the_number_of_its_derivations(R, S, T, rnd):
    """Also with negative multiplicities: a view's value multiplicity sums the join below it."""
    views = view_tree(FactorizedRing(OUTPUT), R, S, T, rnd)
    listing = brute_force(R, S, T)

    def projected(select):
        out: Counter = Counter()
        for t, m in listing.items():
            out[select(t)] += m
        return {k: m for k, m in out.items() if m}

    assert dict(values(views["root"])) == projected(lambda t: t[0])
    st_counts: Counter = Counter()
    for (a, c, _e), ms in S.items():
        st_counts[(a, c)] += ms * sum(mt for (c2, _d), mt in T.items() if c2 == c)
    got = {(a, c): m for a, p in views["ST"].items() for c, m in values(p)}
    assert got == {k: m for k, m in st_counts.items() if m}


def test_running_example_views():
    R = {("a1", "b1"): 1, ("a1", "b2"): 1, ("a2", "b3"): 1}
    S = {("a1", "c1", "e1"): 1, ("a1", "c1", "e2"): 1, ("a1", "c2", "e3"): 1, ("a2", "c2", "e4"): 1}
    T = {("c1", "d1"): 1, ("c2", "d2"): 1, ("c2", "d3"): 1, ("c3", "d4"): 1}
    ring = make_factorized_ring(OUTPUT)
    views = view_tree(ring, R, S, T, random.Random(3))
    assert ring.to_json(views["root"]) == {"count": 10, "variable": "A", "values": [["a1", 8], ["a2", 2]]}
    assert ring.to_json(views["ST"]["a1"]) == {"count": 4, "variable": "C", "values": [["c1", 2], ["c2", 2]]}
    assert views["S"][("a1", "c1")] == 2  # E is bound: a plain count
    assert len(enumerate_join(views, R, T)) == 8


def test_product_keeps_the_highest_variable_scaled_by_the_other_counts():
    ring = FactorizedRing(["a", "b"])
    b_side = ring.add(ring.lift("b", "x"), ring.scale(2, ring.lift("b", "y")))
    p = ring.mul(ring.scale(5, ring.one()), ring.mul(b_side, ring.lift("a", 1)))
    assert p == Factor(0, {1: 15}, 15)
    with pytest.raises(BlockLayoutError):
        ring.mul(ring.lift("a", 1), ring.lift("a", 2))
    with pytest.raises(BlockLayoutError):
        ring.add(ring.lift("a", 1), 1)
    with pytest.raises(BlockLayoutError):
        ring.add(ring.lift("a", 1), ring.lift("b", 1))


def test_values_that_cancel_vanish_and_an_empty_factor_is_zero():
    ring = FactorizedRing(["a"])
    assert ring.add(ring.lift("a", 1), ring.neg(ring.lift("a", 1))) == 0
    mixed = ring.add(ring.lift("a", 1), ring.neg(ring.lift("a", 2)))
    assert count(mixed) == 0 and not ring.is_zero(mixed)
    assert not ring.lifts("e") and ring.lift("e", 3) == 1
    with pytest.raises(ValueError):
        make_factorized_ring(["a"], rows=True)


@given(
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.builds(
            lambda v, vals: Factor(v, vals, sum(vals.values())),
            st.integers(0, 3),
            st.dictionaries(
                st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=3)), st.integers(-(2**40), 2**40)
            ),
        ),
    )
)
def test_encoding_round_trips(payload):
    ring = FactorizedRing(["a", "b", "c", "d"])
    back = ring.decode(ring.encode(payload))
    assert type(back) is type(payload)
    if isinstance(payload, Factor):
        assert (back.var, back.count) == (payload.var, payload.count)
        assert msgspec.msgpack.encode(list(back.values.items())) == msgspec.msgpack.encode(
            list(payload.values.items())
        )
    else:
        assert back == payload


@settings(max_examples=100)
@given(
    st.lists(st.sampled_from([*OUTPUT, "E", "F"]), unique=True, max_size=5),
    st.lists(st.integers(-3, 3), min_size=5, max_size=5),
)
def test_a_lifted_block_equals_the_product_of_its_lifts(variables, xs):
    """A leaf lifts its composed variables in one step; it must equal multiplying their lifts."""
    ring = FactorizedRing(OUTPUT)
    product = ring.one()
    for v, x in zip(variables, xs, strict=False):
        product = ring.mul(product, ring.lift(v, x))
    assert ring.lift_block(variables, xs[: len(variables)]) == product
