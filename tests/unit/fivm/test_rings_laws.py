"""Ring laws for every non-scalar F-IVM payload ring (docs/fivm/rings.md §1).

Each ring supplies a case: strategies for payloads of a given *shape* (a cofactor block, a listing
schema, a factorized variable), shapes that may be added (one shape) or multiplied (shapes a view tree
can multiply: adjacent blocks, disjoint schemas), an independent "every component is zero" test and
exact ring equality. Values are small integers so float arithmetic is exact and the laws hold with ==;
the exact (decimal) cofactor and degree rings (§8) are checked on ints of any size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.fivm.rings.cofactor import Cofactor, CofactorRing, exact_array, tri_size
from ivmstream.services.fivm.rings.degree import DegreeRing
from ivmstream.services.fivm.rings.factorized import Factor, FactorizedRing
from ivmstream.services.fivm.rings.listing import Listing, ListingRing
from ivmstream.services.fivm.rings.matrix import MatrixEntryRing

SMALL = st.integers(-4, 4)
# Exact payloads: small ints, and ints past 64 bits (wide encodings, products of big sums).
EXACT = st.one_of(SMALL, st.integers(-(2**70), 2**70))


@dataclass(frozen=True)
class RingCase:
    ring: Any
    element: Callable[[Any], st.SearchStrategy[Any]]  # shape -> payloads of that shape
    add_shape: st.SearchStrategy[Any]  # one shape whose payloads may be added
    mul_shapes: Callable[[int], st.SearchStrategy[list[Any]]]  # n shapes multipliable in any order
    all_zero: Callable[[Any], bool]  # every component zero, computed without the ring
    equal: Callable[[Any, Any], bool] = lambda a, b: bool(a == b)
    options: dict[str, Any] | None = None  # registry options building the same ring


# --- cofactor: shapes are blocks (lo, k) -------------------------------------------------------


def _cofactor_element(shape: tuple[int, int]) -> st.SearchStrategy[Cofactor]:
    lo, k = shape
    floats = SMALL.map(float)
    return st.builds(
        lambda c, s, q: Cofactor(lo, c, s, q),
        SMALL,
        st.lists(floats, min_size=k, max_size=k),
        st.lists(floats, min_size=tri_size(k), max_size=tri_size(k)),
    )


def _consecutive_blocks(n: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    def blocks(lo: int, widths: list[int]) -> list[tuple[int, int]]:
        out = []
        for k in widths:
            out.append((lo, k))
            lo += k
        return out

    return st.builds(blocks, st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n))


COFACTOR = RingCase(
    ring=CofactorRing([f"x{i}" for i in range(16)]),
    element=_cofactor_element,
    add_shape=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    mul_shapes=_consecutive_blocks,
    all_zero=lambda a: a.count == 0 and not np.any(a.sums) and not np.any(a.quad),
)


def _exact_cofactor_element(shape: tuple[int, int]) -> st.SearchStrategy[Cofactor]:
    lo, k = shape
    return st.builds(
        lambda c, s, q: Cofactor(lo, c, exact_array(s), exact_array(q)),
        EXACT,
        st.lists(EXACT, min_size=k, max_size=k),
        st.lists(EXACT, min_size=tri_size(k), max_size=tri_size(k)),
    )


EXACT_COFACTOR = RingCase(
    ring=CofactorRing([f"x{i}" for i in range(16)], decimals=2),
    element=_exact_cofactor_element,
    add_shape=COFACTOR.add_shape,
    mul_shapes=_consecutive_blocks,
    all_zero=lambda a: a.count == 0 and all(v == 0 for v in [*a.sums.tolist(), *a.quad.tolist()]),
    options={"decimals": 2},
)

# --- degree: one shape; monomials over a few variables, zero entries allowed in the input -----------

_MONOMIALS = st.lists(st.integers(0, 3), max_size=2).map(lambda ix: tuple(sorted(ix)))


def _degree_element(_shape: None) -> st.SearchStrategy[dict]:
    return st.dictionaries(_MONOMIALS, SMALL, max_size=6).map(
        lambda d: {k: (v if not k else float(v)) for k, v in d.items()}
    )


def _without_zeros(a: dict) -> dict:
    return {k: v for k, v in a.items() if v != 0}


DEGREE = RingCase(
    ring=DegreeRing([f"x{i}" for i in range(4)]),
    element=_degree_element,
    add_shape=st.just(None),
    mul_shapes=lambda n: st.just([None] * n),
    all_zero=lambda a: all(v == 0 for v in a.values()),
    equal=lambda a, b: _without_zeros(a) == _without_zeros(b),
)

EXACT_DEGREE = RingCase(
    ring=DegreeRing([f"x{i}" for i in range(4)], decimals=3),
    element=lambda _shape: st.dictionaries(_MONOMIALS, EXACT, max_size=6),
    add_shape=st.just(None),
    mul_shapes=lambda n: st.just([None] * n),
    all_zero=lambda a: all(v == 0 for v in a.values()),
    equal=lambda a, b: _without_zeros(a) == _without_zeros(b),
    options={"decimals": 3},
)

# --- listing: shapes are schemas (ascending column indexes); products need disjoint schemas ---------


def _listing_element(schema: tuple[int, ...]) -> st.SearchStrategy[Listing]:
    row = st.tuples(*(st.integers(0, 2) for _ in schema))
    return st.dictionaries(row, SMALL, max_size=4).map(lambda rows: Listing(schema, rows))


def _disjoint_schemas(n: int) -> st.SearchStrategy[list[tuple[int, ...]]]:
    owner = st.lists(st.integers(-1, n - 1), min_size=6, max_size=6)  # column -> factor (-1: none)
    return owner.map(lambda own: [tuple(c for c, f in enumerate(own) if f == i) for i in range(n)])


LISTING = RingCase(
    ring=ListingRing([f"x{i}" for i in range(6)]),
    element=_listing_element,
    add_shape=_disjoint_schemas(1).map(lambda s: s[0]),
    mul_shapes=_disjoint_schemas,
    all_zero=lambda a: all(m == 0 for m in a.rows.values()),
)

# --- factorized: shapes are an output variable's index, or None for a plain count ---------------


def _factorized_element(var: int | None) -> st.SearchStrategy[Any]:
    if var is None:
        return SMALL
    return st.dictionaries(st.integers(0, 3), SMALL, max_size=4).map(
        lambda vals: Factor(var, vals, sum(vals.values()))
    )


def _distinct_variables(n: int) -> st.SearchStrategy[list[int | None]]:
    return st.tuples(st.permutations(range(6)), st.lists(st.booleans(), min_size=n, max_size=n)).map(
        lambda pv: [v if keep else None for v, keep in zip(pv[0], pv[1], strict=False)]
    )


FACTORIZED = RingCase(
    ring=FactorizedRing([f"x{i}" for i in range(6)]),
    element=_factorized_element,
    add_shape=st.one_of(st.none(), st.integers(0, 3)),
    mul_shapes=_distinct_variables,
    all_zero=lambda a: a == 0 if isinstance(a, int) else a.count == 0 and not any(a.values.values()),
)

MATRIX = RingCase(
    ring=MatrixEntryRing(),
    element=lambda _shape: SMALL.map(float),
    add_shape=st.just(None),
    mul_shapes=lambda n: st.just([None] * n),
    all_zero=lambda a: a == 0.0,
)

CASES = {
    "cofactor": COFACTOR,
    "cofactor-exact": EXACT_COFACTOR,
    "degree": DEGREE,
    "degree-exact": EXACT_DEGREE,
    "listing": LISTING,
    "factorized": FACTORIZED,
    "matrix": MATRIX,
}

case_names = pytest.mark.parametrize("name", sorted(CASES))


def _same_shape(case: RingCase, n: int) -> st.SearchStrategy[list[Any]]:
    return case.add_shape.flatmap(lambda s: st.lists(case.element(s), min_size=n, max_size=n))


def _mul_operands(case: RingCase, n: int) -> st.SearchStrategy[list[Any]]:
    return case.mul_shapes(n).flatmap(lambda shapes: st.tuples(*(case.element(s) for s in shapes)))


@case_names
@given(data=st.data())
def test_addition_is_an_abelian_group(name, data):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    a, b, c = data.draw(_same_shape(case, 3))
    assert eq(ring.add(ring.add(a, b), c), ring.add(a, ring.add(b, c)))
    assert eq(ring.add(a, b), ring.add(b, a))
    assert eq(ring.add(a, ring.zero()), a) and eq(ring.add(ring.zero(), a), a)
    assert ring.is_zero(ring.add(a, ring.neg(a)))
    assert eq(ring.neg(ring.neg(a)), a)


@case_names
@given(data=st.data())
def test_multiplication_is_associative_and_commutative_in_any_caller_order(name, data):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    a, b, c = data.draw(_mul_operands(case, 3))
    left = ring.mul(ring.mul(a, b), c)
    assert eq(left, ring.mul(a, ring.mul(b, c)))
    assert eq(left, ring.mul(c, ring.mul(b, a)))
    assert eq(left, ring.mul(ring.mul(c, b), a))
    assert eq(ring.mul(a, b), ring.mul(b, a))


@case_names
@given(data=st.data())
def test_one_is_the_identity_and_zero_annihilates(name, data):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    (a,) = data.draw(_mul_operands(case, 1))
    assert eq(ring.mul(ring.one(), a), a) and eq(ring.mul(a, ring.one()), a)
    assert ring.is_zero(ring.mul(ring.zero(), a)) and ring.is_zero(ring.mul(a, ring.zero()))
    assert ring.is_zero(ring.zero()) and not ring.is_zero(ring.one())


@case_names
@given(data=st.data())
def test_multiplication_distributes_over_addition(name, data):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    s_a, s_b = data.draw(case.mul_shapes(2))
    a = data.draw(case.element(s_a))
    b, c = data.draw(st.lists(case.element(s_b), min_size=2, max_size=2))
    assert eq(ring.mul(a, ring.add(b, c)), ring.add(ring.mul(a, b), ring.mul(a, c)))
    assert eq(ring.mul(ring.add(b, c), a), ring.add(ring.mul(b, a), ring.mul(c, a)))


@case_names
@given(data=st.data(), k=st.integers(-5, 5))
def test_scale_is_repeated_addition(name, data, k):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    (a,) = data.draw(_same_shape(case, 1))
    total = ring.zero()
    for _ in range(abs(k)):
        total = ring.add(total, a if k > 0 else ring.neg(a))
    assert eq(ring.scale(k, a), total)
    assert eq(ring.scale(k, ring.one()), ring.scale(k, ring.one()))


@case_names
@given(data=st.data())
def test_is_zero_exactly_when_every_component_is_zero(name, data):
    case = CASES[name]
    (a,) = data.draw(_same_shape(case, 1))
    assert case.ring.is_zero(a) == case.all_zero(a)


@case_names
@given(data=st.data())
def test_encode_decode_round_trip(name, data):
    case = CASES[name]
    ring, eq = case.ring, case.equal
    (a,) = data.draw(_same_shape(case, 1))
    raw = ring.encode(a)
    back = ring.decode(raw)
    assert eq(back, a)
    assert ring.encode(back) == raw


def test_the_registry_builds_each_ring_by_name():
    from ivmstream.services.fivm.rings import make_ring

    for case in CASES.values():
        lifted = list(getattr(case.ring, "variables", ()))
        ring = make_ring(case.ring.name, lifted, **(case.options or {}))
        assert type(ring) is type(case.ring)
        assert getattr(ring, "decimals", None) == getattr(case.ring, "decimals", None)
