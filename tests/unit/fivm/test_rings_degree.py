"""The degree-indexed (SQL-OPT) ring computes what the cofactor ring computes (fivm-rings.md §3)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.cofactor import CofactorRing
from ivmstream.services.fivm.rings.degree import DegreeRing, make_degree_ring

NAMES = ["A", "r0", "r1", "s0"]
R_PRIVATE, S_PRIVATE = NAMES[1:3], NAMES[3:]


def two_relation_root(ring, R, S):
    """Σ_a g_A(a) ⊗ (Σ_{R[a]} lifts) ⊗ (Σ_{S[a]} lifts), multiplying blocks in preorder."""

    def leaf(rel, private):
        view: dict = defaultdict(ring.zero)
        for (key, *vals), mult in rel.items():
            view[key] = ring.add(view[key], ring.scale(mult, ring.lift_block(private, vals)))
        return view

    v_r, v_s = leaf(R, R_PRIVATE), leaf(S, S_PRIVATE)
    root = ring.zero()
    for a in sorted(v_r.keys() & v_s.keys()):
        root = ring.add(root, ring.mul(ring.lift("A", a), ring.mul(v_r[a], v_s[a])))
    return root


def relation(width, values):
    return st.dictionaries(
        st.tuples(st.integers(0, 3), *([values] * width)), st.integers(-3, 3).filter(bool), max_size=10
    )


@settings(max_examples=200)
@given(relation(2, st.integers(-20, 20)), relation(1, st.integers(-20, 20)))
def test_degree_ring_equals_cofactor_ring_exactly_on_integer_data(R, S):
    cof, deg = CofactorRing(NAMES), DegreeRing(NAMES)
    want = cof.to_json(two_relation_root(cof, R, S))
    got = deg.to_json(two_relation_root(deg, R, S))
    assert got == want
    assert isinstance(got["count"], int)


FLOATS = st.floats(-1e3, 1e3, allow_nan=False)


@settings(max_examples=100)
@given(relation(2, FLOATS), relation(1, FLOATS))
def test_degree_ring_agrees_with_cofactor_ring_on_real_data(R, S):
    cof, deg = CofactorRing(NAMES), DegreeRing(NAMES)
    want = cof.to_json(two_relation_root(cof, R, S))
    got = deg.to_json(two_relation_root(deg, R, S))
    assert got["count"] == want["count"]
    magnitude = sum(abs(m) * sum(float(v) ** 2 for v in t) for t, m in R.items()) * (1 + len(S))
    magnitude += sum(abs(m) * sum(float(v) ** 2 for v in t) for t, m in S.items()) * (1 + len(R))
    tol = 1e-9 * max(1.0, magnitude)
    assert np.allclose(got["sum"], want["sum"], rtol=0, atol=tol)
    assert np.allclose(got["sumprod"], want["sumprod"], rtol=0, atol=tol)


def test_lift_holds_count_sum_and_square_and_drops_zero_aggregates():
    ring = make_degree_ring(["a", "b"])
    assert ring.lift("b", 3) == {(): 1, (1,): 3.0, (1, 1): 9.0}
    assert ring.lift("a", 0) == {(): 1}
    assert ring.lift("z", 5) == ring.one()
    assert ring.mul(ring.lift("a", 2), ring.lift("b", 3)) == {
        (): 1,
        (0,): 2.0,
        (1,): 3.0,
        (0, 0): 4.0,
        (1, 1): 9.0,
        (0, 1): 6.0,
    }


def test_a_cancelled_count_is_not_zero():
    ring = DegreeRing(["x"])
    delta = ring.add(ring.scale(-2, ring.lift("x", 1)), ring.scale(2, ring.lift("x", 2)))
    assert () not in delta
    assert not ring.is_zero(delta)


@given(st.integers(-(2**90), 2**90), st.floats(allow_nan=True), st.integers(0, 2**32 - 1))
def test_encoding_keeps_exact_ints_and_float_bits(count, value, index):
    ring = DegreeRing(["x"])
    payload = {(): count, (index,): value, (0, index): -value}
    back = ring.decode(ring.encode(payload))
    assert back.keys() == payload.keys()
    assert back[()] == count and isinstance(back[()], int)
    for key in ((index,), (0, index)):
        assert isinstance(back[key], float)
        assert np.float64(back[key]).tobytes() == np.float64(payload[key]).tobytes()
