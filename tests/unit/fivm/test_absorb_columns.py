"""A relation's batch given as columns is summed in one pass (``kernels.absorb_columns``, compiled in
services/fivm/_kernels.c, ``py_absorb_columns`` under IVMSTREAM_PURE_PYTHON=1): both forms give what
the rows summed one at a time give (same tuples in the same order, same sums, no -0.0), and both leave
to the per-event checks exactly the batches holding a row they must see."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm import kernels
from tests.unit.extension_checks import require_built

C: Any = kernels.compiled
require_built(C, "F-IVM kernels", "ivmstream.services.fivm._kernels", "services/fivm/_*.c")

GOOD = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e308, -1e308])
BAD = st.sampled_from([math.nan, math.inf, -math.inf, 2, True, "1", None])
GOOD_DELTA = st.sampled_from([1, 1, 1, -1, 2])
BAD_DELTA = st.sampled_from([0, True, 1.0, None])


def brute(columns: list[list[Any]], deltas: list[Any]) -> dict[tuple[Any, ...], int] | None:
    """The definition, row by row: None for an empty batch or any row with a delta that is not a
    non-zero int or a value that is not a finite float; else each row's tuple (-0.0 as 0.0) summed."""
    if not deltas:
        return None
    out: dict[tuple[Any, ...], int] = {}
    for i, m in enumerate(deltas):
        row = [column[i] for column in columns]
        if type(m) is not int or m == 0 or any(type(v) is not float or not math.isfinite(v) for v in row):
            return None
        key = tuple(v + 0.0 for v in row)
        out[key] = out.get(key, 0) + m
    return out


@st.composite
def batch(draw: st.DrawFn, bad: bool) -> tuple[list[list[Any]], list[Any]]:
    width, n = draw(st.integers(0, 4)), draw(st.integers(0, 25))
    value = st.one_of(GOOD, GOOD, GOOD, GOOD, GOOD, BAD) if bad else GOOD
    delta = st.one_of(GOOD_DELTA, GOOD_DELTA, GOOD_DELTA, BAD_DELTA) if bad else GOOD_DELTA
    # few distinct values per column: duplicates and deltas summing to zero are common
    columns = [draw(st.lists(value, min_size=n, max_size=n)) for _ in range(width)]
    return columns, draw(st.lists(delta, min_size=n, max_size=n))


@settings(max_examples=200, deadline=None)
@given(batch(bad=False) | batch(bad=True))
def test_compiled_and_python_forms_sum_the_rows_as_one_at_a_time(drawn: tuple[list[list[Any]], list[Any]]):
    columns, deltas = drawn
    want = brute(columns, deltas)
    got, python = C.absorb_columns(columns, deltas), kernels.py_absorb_columns(columns, deltas)
    if want is None:
        assert got is None and python is None
        return
    assert got is not None and python is not None
    assert list(got.items()) == list(python.items()) == list(want.items())  # same order, same sums
    assert all(math.copysign(1.0, v) > 0 for key in got for v in key if v == 0.0)  # no -0.0 stored
    assert [list(col) for col in zip(*got, strict=True)] == [
        list(col) for col in zip(*want, strict=True)
    ]  # the stored floats themselves, not only equal ones


def test_a_column_sum_that_overflows_from_finite_values_is_still_absorbed():
    columns, deltas = [[1e308, 1e308, -1e308]], [1, 1, 1]
    want = {(1e308,): 2, (-1e308,): 1}
    assert C.absorb_columns(columns, deltas) == kernels.py_absorb_columns(columns, deltas) == want


def test_malformed_arguments_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="differ in length"):
        C.absorb_columns([[1.0, 2.0]], [1])
    with pytest.raises(TypeError, match="column must be a sequence"):
        C.absorb_columns([1.0], [1])
    with pytest.raises(TypeError, match="expected 2 arguments"):
        C.absorb_columns([[1.0]])


def test_the_engine_reads_batches_through_the_compiled_form_unless_told_not_to():
    active = C.absorb_columns if kernels.ACTIVE == "compiled" else kernels.py_absorb_columns
    assert kernels.absorb_columns is active
