"""The reference engine's batch update ``bag_rows``: the compiled kernel (services/reference/_bag_rows.c)
against its Python form ``py_bag_rows`` and against a brute-force multiset, on random rows of str, int,
bool and decimal columns over random resident dicts: duplicates, deletes, counts crossing zero (and
deletes below it, refused unless negatives are allowed), decimals written differently ("1.5", "1.50",
"15E-1", "-0"), as Decimals or as the plain decimal strings they were written as, decimal sums (exact in
C, and sums that leave the context's precision, where Python's arithmetic takes over), and the values the
kernel leaves to Python (non-finite decimals, decimals beyond the context's precision, ints beyond 64
bits, deltas beyond 2^40), for which it changes nothing."""

from __future__ import annotations

from collections import Counter
from decimal import ROUND_FLOOR, Decimal, localcontext
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reference import bag_rows as kernel
from ivmstream.services.reference.engine import BagEngine, kernel_precision, member_hash
from tests.unit.extension_checks import printed_in_child, require_built

require_built(
    kernel.compiled_bag_rows,
    "reference kernels",
    "ivmstream.services.reference._kernels",
    "services/reference/_*.c",
)

C = kernel.compiled_bag_rows
TYPES = {"item": "str", "qty": "int", "ok": "bool", "price": "decimal"}
NAMES = list(TYPES)
FLAGS = kernel.decimal_flags(list(TYPES.values()))
SUMMED = [1, 3]  # qty and price
ENGINE = BagEngine({"r": TYPES})

DECIMALS = [
    "1.5",
    "1.50",
    "15E-1",
    "-0",
    "0",
    "0.000",
    "2E+3",
    "2000",
    "-7.25",
    "0.0000001",
    "1E-7",
    "123.4500",
]
TEXT_ONLY = ["+.5", "5.", "-0.00", "1e3", "007.10"]  # plain decimal strings Decimal's str never writes
# sums that leave the context's 28 digits: the rest of the batch is summed by Python's arithmetic
ROUNDING = ["9999999999999999999999999999", "1E+27", "-1E+27", "0.0000000000000000000000000001"]
LEFT_TO_PYTHON = ["Infinity", "-Infinity", "NaN", "1234567890123456789012345678901", "1E+999999"]

rows = st.tuples(
    st.sampled_from(["a", "b", 'q"\\', "é\n"]),
    st.integers(-3, 3),
    st.booleans(),
    st.one_of(  # a Decimal, or the plain decimal string it was written as (decimal_text)
        st.sampled_from(DECIMALS + ROUNDING).map(Decimal),
        st.sampled_from(DECIMALS + TEXT_ONLY + ROUNDING),
    ),
)
deltas = st.sampled_from([1, 1, 1, 2, -1, -2, -3])


def member(row: tuple[Any, ...]) -> bytes:
    return ENGINE.member("r", (*row[:3], Decimal(row[3])))


def columns_of(batch: list[tuple[tuple[Any, ...], int]]) -> tuple[list[list[Any]], list[int]]:
    return [[row[j] for row, _d in batch] for j in range(len(NAMES))], [d for _row, d in batch]


@st.composite
def resident(draw: st.DrawFn) -> tuple[dict[bytes, int | None], dict[bytes, int | None]]:
    """Dirty and clean dicts as a StoreBackedMap keeps them: a key in one at most, None a delete."""
    dirty: dict[bytes, int | None] = {}
    clean: dict[bytes, int | None] = {}
    for row, where, m in draw(
        st.lists(st.tuples(rows, st.sampled_from("dc"), st.integers(0, 3)), max_size=8)
    ):
        key = member(row)
        if key in dirty or key in clean:
            continue
        if where == "d":
            dirty[key] = m or None
        elif m:
            clean[key] = m
    return dirty, clean


def run(fn: Any, batch: list, dirty: dict, clean: dict, allow_negative: bool, sums: list) -> Any:
    columns, ds = columns_of(batch)
    return fn(
        "r", columns, FLAGS, ds, dirty, clean, allow_negative, SUMMED, sums, kernel_precision(), Decimal
    )


def brute(
    batch: list, dirty: dict, clean: dict, allow_negative: bool, sums: list
) -> tuple[Counter, list[tuple[int, int]], int, int, list]:
    """Each row applied to a multiset of member keys, one at a time."""
    bag: Counter = Counter({k: v for k, v in clean.items() if v}) + Counter()
    for k, v in dirty.items():
        bag[k] = v or 0
    refused, fingerprint, sums = [], 0, list(sums)
    applied = 0
    for i, (row, d) in enumerate(batch):
        key = member(row)
        if bag[key] + d < 0 and not allow_negative:
            refused.append((i, bag[key]))
            continue
        bag[key] += d
        fingerprint += d * member_hash(key)
        sums[0] += row[1] * d
        sums[1] += Decimal(row[3]) * d
        applied += 1
    return bag, refused, applied, fingerprint % 2**128, sums


def multiset(dirty: dict, clean: dict) -> dict[bytes, int]:
    merged = {k: v for k, v in clean.items() if v}
    merged.update({k: v for k, v in dirty.items() if v})
    return {k: v for k, v in merged.items() if v}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(rows, deltas), max_size=30), resident(), st.booleans())
def test_compiled_equals_python_and_brute_force(batch, state, allow_negative):
    sums = [5, Decimal("0.5")]
    outs, dicts = [], []
    for fn in (C, kernel.py_bag_rows):
        dirty, clean = dict(state[0]), dict(state[1])
        outs.append(run(fn, batch, dirty, clean, allow_negative, sums))
        dicts.append((dirty, clean))
    assert outs[0] is not None  # every value here is one the kernel writes
    assert outs[0] == outs[1]
    assert [str(s) for s in outs[0][5]] == [str(s) for s in outs[1][5]]  # the same decimal digits
    assert dicts[0] == dicts[1]
    dirty, clean = dicts[0]
    assert not set(dirty) & set(clean)
    bag, refused, applied, fingerprint, want_sums = brute(batch, state[0], state[1], allow_negative, sums)
    got_refused, got_applied, total, distinct, got_fingerprint, got_sums = outs[0]
    assert got_refused == refused
    assert got_applied == applied
    assert total == sum(d for i, (_r, d) in enumerate(batch) if i not in {j for j, _m in refused})
    assert multiset(dirty, clean) == {k: v for k, v in bag.items() if v}
    assert distinct == sum(1 for v in bag.values() if v) - len(multiset(*state))
    assert got_fingerprint == fingerprint
    assert [str(s) for s in got_sums] == [str(s) for s in want_sums]  # the same digits and exponent


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(rows, deltas), min_size=1, max_size=10),
    st.integers(0, 9),
    st.sampled_from(
        [
            ("price", Decimal(LEFT_TO_PYTHON[0])),
            ("price", Decimal(LEFT_TO_PYTHON[1])),
            ("price", Decimal(LEFT_TO_PYTHON[2])),
            ("price", Decimal(LEFT_TO_PYTHON[3])),
            ("price", Decimal(LEFT_TO_PYTHON[4])),
            ("price", 1.5),
            ("qty", 2**64),
            ("qty", 1.0),
            ("delta", 2**41),
        ]
    ),
    resident(),
)
def test_a_batch_with_a_value_the_kernel_does_not_write_is_left_to_python_unchanged(batch, at, odd, state):
    at %= len(batch)
    where, value = odd
    row, d = batch[at]
    if where == "delta":
        batch[at] = (row, value)
    else:
        j = NAMES.index(where)
        batch[at] = ((*row[:j], value, *row[j + 1 :]), d)
    dirty, clean = dict(state[0]), dict(state[1])
    assert run(C, batch, dirty, clean, False, [0, Decimal(0)]) is None
    assert (dirty, clean) == state


@pytest.mark.parametrize(
    ("start", "prices", "deltas"),
    [
        ("0", ["1E+27", "0.0000000000000000000000000001", "5", "-1E+27"], [1, 1, 2, 1]),  # leaves 28 digits
        ("9999999999999999999999999999", ["1"], [1]),  # the first step rounds
        ("-0", ["-0.00", "0"], [1, -1]),  # -0 + -0.00 stays -0.00, then + -0 (0 * -1)
        ("0E+3", ["-0.0"], [2]),
        ("1.5", ["-1.50", "2E+40"], [1, 3]),  # exactly 0 (0.00), then beyond the precision
        ("0", ["9999999999999999999999999999", "1.5"], [2**40, -(2**40)]),  # products that round
    ],
)
def test_decimal_sums_are_pythons_digit_for_digit(start, prices, deltas):
    batch = [(("a", 1, True, p), d) for p, d in zip(prices, deltas, strict=True)]
    want = Decimal(start)
    for p, d in zip(prices, deltas, strict=True):
        want = want + Decimal(p) * d
    for fn in (C, kernel.py_bag_rows):
        out = run(fn, batch, {}, {}, True, [0, Decimal(start)])
        assert out is not None and str(out[5][1]) == str(want)


def test_counts_beyond_64_bits_are_python_ints():
    key = member(("a", 1, True, Decimal("1.5")))
    dirty: dict[bytes, int | None] = {}
    clean: dict[bytes, int | None] = {key: 2**70}
    out = run(C, [(("a", 1, True, Decimal("1.5")), -3)], dirty, clean, False, [0, Decimal(0)])
    assert out is not None and out[0] == [] and dirty == {key: 2**70 - 3} and clean == {}


def test_a_decimal_context_unlike_the_default_leaves_decimals_to_python():
    with localcontext(rounding=ROUND_FLOOR):
        assert kernel_precision() == 0
        assert run(C, [(("a", 1, True, Decimal("-0")), 1)], {}, {}, False, [0, Decimal(0)]) is None
    with localcontext(prec=5):
        assert kernel_precision() == 5
        assert run(C, [(("a", 1, True, Decimal("1.23456")), 1)], {}, {}, False, [0, Decimal(0)]) is None


def test_the_engine_updates_in_c_unless_pure_python_is_asked_for():
    assert kernel.bag_rows is C
    code = (
        "from ivmstream.services.reference import bag_rows; print(bag_rows.bag_rows is bag_rows.py_bag_rows)"
    )
    assert printed_in_child(code) == ["True"]
