"""Matrix chain: entry payloads and the dense update paths agree with recomputation (fivm-rings.md §6)."""

from __future__ import annotations

import struct
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.matrix import (
    MatrixEntryRing,
    add_low_rank,
    chain_product,
    expand,
    factorized_delta,
    first_order_delta,
    make_matrix_ring,
    row_update,
)


def assert_matrix_close(got, want):
    scale = max(1.0, float(np.linalg.norm(want)))
    assert np.max(np.abs(got - want), initial=0.0) <= 1e-9 * scale


@settings(max_examples=100)
@given(st.integers(2, 8), st.integers(0, 2**32 - 1), st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_factorized_and_first_order_updates_equal_recomputation(n, seed, ranks):
    """Rank-r updates (r = 0 means a one-row update) to the middle matrix of A1·A2·A3."""
    rng = np.random.default_rng(seed)
    a1, a2, a3 = (rng.normal(size=(n, n)) for _ in range(3))
    a_fivm = chain_product([a1, a2, a3])
    a_first = a_fivm.copy()
    for r in ranks:
        if r == 0:
            u, v = row_update(n, int(rng.integers(n)), rng.normal(size=n))
        else:
            u, v = rng.normal(size=(n, r)), rng.normal(size=(n, r))
        before = (a1.copy(), a3.copy())
        u1, v1 = factorized_delta(a1, u, v, a3)
        assert add_low_rank(a_fivm, u1, v1, inplace=True) is a_fivm
        a_first = a_first + first_order_delta(a1, expand(u, v), a3)
        a2 = a2 + expand(u, v)
        assert np.array_equal(before[0], a1) and np.array_equal(before[1], a3)
        want = chain_product([a1, a2, a3])
        assert_matrix_close(a_fivm, want)
        assert_matrix_close(a_first, want)


def test_a_rank_one_update_given_as_vectors_is_an_outer_product():
    u, v = np.array([1.0, 2.0]), np.array([3.0, 0.0, -1.0])
    assert np.array_equal(expand(u, v), np.outer(u, v))
    a = np.zeros((2, 3))
    assert np.array_equal(add_low_rank(a, u, v), np.outer(u, v)) and not a.any()
    with pytest.raises(ValueError):
        factorized_delta(np.eye(2), np.ones((2, 2)), np.ones((3, 1)), np.eye(3))
    with pytest.raises(ValueError):
        chain_product([])


def entries(matrix):
    return {(i, j): float(x) for (i, j), x in np.ndenumerate(matrix) if x != 0}


@given(st.integers(0, 2**32 - 1), st.floats(0.0, 0.9))
def test_view_tree_over_entry_payloads_equals_the_dense_chain(seed, sparsity):
    """Q[I,L] = ⊕_K (⊕_J A1[I,J] ⊗ A2[J,K]) ⊗ A3[K,L], on dict-of-entries relations."""
    rng = np.random.default_rng(seed)
    mats = [np.where(rng.random((4, 4)) < sparsity, 0.0, rng.normal(size=(4, 4))) for _ in range(3)]
    ring = make_matrix_ring([])
    a1, a2, a3 = (entries(m) for m in mats)
    v_j: dict = defaultdict(ring.zero)
    for (i, j), x in a1.items():
        for (j2, k), y in a2.items():
            if j == j2:
                v_j[(i, k)] = ring.add(v_j[(i, k)], ring.mul(ring.mul(x, y), ring.lift("J", j)))
    root: dict = defaultdict(ring.zero)
    for (i, k), x in v_j.items():
        for (k2, ll), y in a3.items():
            if k == k2:
                root[(i, ll)] = ring.add(root[(i, ll)], ring.mul(x, y))
    got = np.zeros((4, 4))
    for (i, ll), x in root.items():
        if not ring.is_zero(x):
            got[i, ll] = ring.to_json(x)
    assert_matrix_close(got, chain_product(mats))


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_encoding_is_bit_exact(x):
    ring = MatrixEntryRing()
    assert struct.pack("<d", ring.decode(ring.encode(x))) == struct.pack("<d", x)


def test_the_ring_lifts_nothing():
    ring = MatrixEntryRing()
    assert not ring.lifts("I") and ring.lift("J", 5) == ring.one() == 1.0
    with pytest.raises(ValueError):
        make_matrix_ring(["I"])
    with pytest.raises(ValueError):
        make_matrix_ring([], dense=True)
