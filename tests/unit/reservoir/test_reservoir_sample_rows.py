"""The compiled sample rows (services/reservoir/_sample_rows.c, ``sample_dicts``) are the Python form's
(``ReservoirEngine.result``: a sample of ints sorted by value, each row a dict of the columns in their
order): on samples of ints of every size, and it declines (None, the Python form then runs) every other
sample, a bool, a float, a string, None or a row of another width among the ints; an engine's result is
the same with the kernel and without it."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reservoir import kernels
from tests.unit.reservoir.oracle import LINE3, engine, event

BUILD = "not built: `make setup` compiles services/reservoir/_sample_rows.c into the reservoir kernels"
COLS = ("a", "b", "c")
INTS = st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70))
OTHER = st.one_of(st.booleans(), st.floats(allow_nan=False), st.text(max_size=2), st.none())


def python_form(cols: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[list[tuple[str, Any]]]:
    """The Python form for a sample of ints: sorted, then each row zipped with the columns."""
    return [list(d.items()) for d in map(dict, map(partial(zip, cols, strict=True), sorted(rows)))]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(INTS, INTS, INTS), max_size=30))
def test_a_sample_of_ints_gives_the_python_rows_in_the_python_order(rows: list[tuple[int, ...]]):
    assert kernels.compiled is not None, BUILD
    got = kernels.compiled.sample_dicts(COLS, rows)
    assert got is not None
    assert [list(d.items()) for d in got] == python_form(COLS, rows)
    assert all(type(d) is dict for d in got)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(INTS, INTS, INTS), max_size=10),
    odd=st.one_of(
        st.tuples(OTHER, INTS, INTS),
        st.tuples(INTS, INTS, OTHER),
        st.tuples(INTS, INTS),
        st.tuples(INTS, INTS, INTS, INTS),
    ),
    at=st.integers(0, 10),
)
def test_any_other_sample_is_left_to_the_python_form(
    rows: list[tuple[Any, ...]], odd: tuple[Any, ...], at: int
):
    assert kernels.compiled is not None, BUILD
    rows.insert(min(at, len(rows)), odd)
    assert kernels.compiled.sample_dicts(COLS, rows) is None


def test_an_engine_gives_the_same_result_with_the_kernel_and_without():
    assert kernels.compiled is not None, BUILD
    results = []
    for native in (kernels.compiled, None):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(kernels, "native", native)
            e = engine(LINE3, k=6, seed=4)
            e.apply([event("E", ["src", "dst"], [i % 7, (3 * i) % 5]) for i in range(40)])
            results.append(e.result())
    assert results[0] == results[1]
    assert [list(r) for r in results[0]["sample"]] == [list(r) for r in results[1]["sample"]]
    assert len(results[0]["sample"]) == 6
