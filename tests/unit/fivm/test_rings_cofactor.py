"""The cofactor ring against dense formulas and brute-force joins (docs/fivm/rings.md §2)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.cofactor import (
    BlockLayoutError,
    Cofactor,
    CofactorRing,
    CofactorRows,
    make_cofactor_ring,
    mul_rows,
    sum_by,
    tri_size,
)

VALUES = st.floats(-100, 100, allow_nan=False, allow_infinity=False)
MULTS = st.integers(-3, 3).filter(bool)


def dense_mul(a, b):
    """The degree-m ring product on full triples (c, s, Q), as defined, without blocks."""
    (ca, sa, qa), (cb, sb, qb) = a, b
    return ca * cb, cb * sa + ca * sb, cb * qa + ca * qb + np.outer(sa, sb) + np.outer(sb, sa)


def dense(ring, p):
    j = ring.to_json(p)
    return j["count"], np.array(j["sum"]), np.array(j["sumprod"])


def assert_close(got, want, magnitude):
    """float64 sums of n terms of size up to ``magnitude`` in total: relative error far below 1e-9."""
    tol = 1e-9 * max(1.0, magnitude)
    assert np.max(np.abs(np.asarray(got) - np.asarray(want)), initial=0.0) <= tol


@given(st.lists(VALUES, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_product_of_a_tuples_lifts_is_one_t_ttT_in_any_valid_order(t, rnd):
    names = [f"v{i}" for i in range(len(t))]
    ring = CofactorRing(names)
    # Grow a contiguous range outward from a random start: every partial product stays one block.
    lo = hi = rnd.randrange(len(t))
    product = ring.lift(names[lo], t[lo])
    while hi - lo + 1 < len(t):
        if lo > 0 and (hi == len(t) - 1 or rnd.random() < 0.5):
            lo -= 1
            product = ring.mul(ring.lift(names[lo], t[lo]), product)
        else:
            hi += 1
            product = ring.mul(product, ring.lift(names[hi], t[hi]))
    c, s, q = dense(ring, product)
    x = np.array(t)
    assert c == 1
    assert np.array_equal(s, x)
    assert np.array_equal(q, np.outer(x, x))
    assert product == ring.lift_block(names, t)


@given(st.data())
def test_block_product_equals_the_dense_product(data):
    m = data.draw(st.integers(1, 7))
    ring = CofactorRing([f"v{i}" for i in range(m)])
    cut = data.draw(st.integers(0, m))
    floats = st.floats(-10, 10, allow_nan=False)

    def block(lo, k):
        return Cofactor(
            lo,
            data.draw(st.integers(-5, 5)),
            data.draw(st.lists(floats, min_size=k, max_size=k)),
            data.draw(st.lists(floats, min_size=tri_size(k), max_size=tri_size(k))),
        )

    a, b = block(0, cut), block(cut, m - cut)
    got = dense(ring, ring.mul(b, a))
    want = dense_mul(dense(ring, a), dense(ring, b))
    assert got[0] == want[0]
    assert_close(got[1], want[1], 1e3)
    assert_close(got[2], want[2], 1e4)


def _relation(draw_rows, n_private):
    """A Z-relation {(key, private values...) -> multiplicity} with duplicates merged."""
    rel: dict[tuple, int] = defaultdict(int)
    for key, vals, mult in draw_rows:
        rel[(key, *vals[:n_private])] += mult
    return {t: m for t, m in rel.items() if m}


rows = st.lists(st.tuples(st.integers(0, 3), st.lists(VALUES, min_size=3, max_size=3), MULTS), max_size=12)


@settings(max_examples=200)
@given(rows, rows, st.integers(0, 3), st.integers(0, 3))
def test_factorized_two_relation_join_equals_the_materialised_join(r_rows, s_rows, p, q):
    """Σ_a g_A(a)·(Σ_{R[a]} lifts)·(Σ_{S[a]} lifts) equals (N, Σ t, Σ t tᵀ) over the flat join."""
    R, S = _relation(r_rows, p), _relation(s_rows, q)
    names = ["A"] + [f"r{i}" for i in range(p)] + [f"s{i}" for i in range(q)]
    ring = CofactorRing(names)

    def leaf(rel, private):
        view: dict[int, Cofactor] = {}
        for (key, *vals), mult in rel.items():
            lifted = ring.scale(mult, ring.lift_block(private, vals))
            view[key] = ring.add(view.get(key, ring.zero()), lifted)
        return view

    v_r, v_s = leaf(R, names[1 : 1 + p]), leaf(S, names[1 + p :])
    root = ring.zero()
    for a in v_r.keys() & v_s.keys():
        root = ring.add(root, ring.mul(ring.mul(v_s[a], v_r[a]), ring.lift("A", a)))

    flat = [
        (np.array([float(ra), *rv, *sv]), rm * sm)
        for (ra, *rv), rm in R.items()
        for (sa, *sv), sm in S.items()
        if ra == sa
    ]
    n = sum(m for _, m in flat)
    s_want = sum((m * t for t, m in flat), np.zeros(len(names)))
    q_want = sum((m * np.outer(t, t) for t, m in flat), np.zeros((len(names), len(names))))
    magnitude = sum(abs(m) * float(t @ t) for t, m in flat)
    c, s, qq = dense(ring, root)
    assert c == n
    assert_close(s, s_want, math.sqrt(magnitude) * len(flat) + 1)
    assert_close(qq, q_want, magnitude)
    assert np.array_equal(qq, qq.T)


def test_a_cancelled_count_is_not_zero():
    """Delete (k, x=1) and insert (k, x=2) in one batch: the count cancels, the sums do not."""
    ring = CofactorRing(["x"])
    delta = ring.add(ring.scale(-3, ring.lift("x", 1.0)), ring.scale(3, ring.lift("x", 2.0)))
    assert delta.count == 0
    assert not ring.is_zero(delta)
    assert dense(ring, delta)[1].tolist() == [3.0]


def test_every_single_nonzero_component_makes_a_payload_nonzero():
    ring = CofactorRing(["a", "b"])
    for position in range(1 + 2 + 3):
        comps = [0.0] * 6
        comps[position] = 1e-300
        p = Cofactor(0, int(comps[0] != 0), comps[1:3], comps[3:])
        assert not ring.is_zero(p)
    assert ring.is_zero(Cofactor(0, 0, [0.0, -0.0], [0.0, 0.0, -0.0]))


@given(
    st.integers(0, 5),
    st.integers(-(2**80), 2**80),
    st.data(),
)
def test_encode_decode_is_bit_exact(lo, count, data):
    ring = CofactorRing([f"v{i}" for i in range(12)])
    k = data.draw(st.integers(0, 4))
    anything = st.floats(allow_nan=True, allow_infinity=True)
    p = Cofactor(
        lo,
        count,
        data.draw(st.lists(anything, min_size=k, max_size=k)),
        data.draw(st.lists(anything, min_size=tri_size(k), max_size=tri_size(k))),
    )
    back = ring.decode(ring.encode(p))
    assert (back.lo, back.count, back.k) == (p.lo, p.count, p.k)
    assert back.sums.tobytes() == p.sums.tobytes() and back.quad.tobytes() == p.quad.tobytes()


def test_decode_refuses_truncated_bytes():
    ring = CofactorRing(["a", "b"])
    raw = ring.encode(ring.lift_block(["a", "b"], [1.0, 2.0]))
    with pytest.raises(ValueError):
        ring.decode(raw[:-1])


def test_blocks_that_are_not_adjacent_are_an_engine_error():
    ring = CofactorRing(["a", "b", "c"])
    with pytest.raises(BlockLayoutError, match="non-adjacent"):
        ring.mul(ring.lift("a", 1), ring.lift("c", 2))
    with pytest.raises(BlockLayoutError, match="overlapping"):
        ring.mul(ring.lift("a", 1), ring.lift("a", 2))
    with pytest.raises(BlockLayoutError, match="different views"):
        ring.add(ring.lift("a", 1), ring.lift("b", 2))
    with pytest.raises(BlockLayoutError, match="consecutive"):
        ring.lift_block(["a", "c"], [1, 2])


def test_unlifted_variables_lift_to_one_and_the_factory_checks_options():
    ring = make_cofactor_ring(["a"])
    assert ring.lifts("a") and not ring.lifts("z")
    assert ring.lift("z", 7) == ring.one()
    with pytest.raises(ValueError):
        make_cofactor_ring(["a"], rows=True)
    with pytest.raises(ValueError):
        make_cofactor_ring(["a", "a"])


def test_payload_arrays_are_read_only():
    ring = CofactorRing(["a", "b"])
    p = ring.mul(ring.lift("a", 1.0), ring.lift("b", 2.0))
    for arr in (p.sums, p.quad, ring.decode(ring.encode(p)).sums):
        with pytest.raises(ValueError):
            arr[0] = 5.0


@given(st.lists(st.tuples(st.lists(st.integers(-3, 3), min_size=3, max_size=3), MULTS), max_size=8))
def test_to_json_of_a_bag_is_its_count_sums_and_symmetric_products(bag):
    ring = CofactorRing(["x", "y", "z"])
    total = ring.zero()
    for t, m in bag:
        total = ring.add(total, ring.scale(m, ring.lift_block(["x", "y", "z"], t)))
    out = ring.to_json(total)
    assert out["variables"] == ["x", "y", "z"]
    assert out["count"] == sum(m for _, m in bag)
    for i, j in itertools.product(range(3), repeat=2):
        assert out["sumprod"][i][j] == sum(m * t[i] * t[j] for t, m in bag)
    assert out["sum"] == [float(sum(m * t[i] for t, m in bag)) for i in range(3)]


def _block_rows(data, lo, k, n):
    ints = st.integers(-4, 4)
    return [
        Cofactor(
            lo,
            data.draw(ints),
            data.draw(st.lists(ints.map(float), min_size=k, max_size=k)),
            data.draw(st.lists(ints.map(float), min_size=tri_size(k), max_size=tri_size(k))),
        )
        for _ in range(n)
    ]


@given(st.data(), st.integers(0, 6), st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_batch_product_and_group_sum_equal_the_per_tuple_ring(data, n, ka, kb, swap):
    ring = CofactorRing([f"v{i}" for i in range(8)])
    left, right = _block_rows(data, 1, ka, n), _block_rows(data, 1 + ka, kb, n)
    a, b = CofactorRows.of(left), CofactorRows.of(right)
    product = mul_rows(b, a) if swap else mul_rows(a, b)
    want = [ring.mul(x, y) for x, y in zip(left, right, strict=True)]
    assert [product.row(i) for i in range(n)] == want
    groups = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ids, summed = sum_by(groups, product)
    expected: dict = {}
    for g, p in zip(groups, want, strict=True):
        expected[g] = ring.add(expected.get(g, ring.zero()), p)
    assert ids.tolist() == sorted(expected)
    assert [summed.row(i) for i in range(len(ids))] == [expected[g] for g in sorted(expected)]
    with pytest.raises(BlockLayoutError):
        mul_rows(CofactorRows.of(_block_rows(data, 0, 1, 1)), CofactorRows.of(_block_rows(data, 2, 1, 1)))
