"""The aggregation's generated per-row steps (``folds``) against the generic loops they replace and against
sums over the rows: group keys, folds of inserts and deletes (NULLs, ints, Decimals, Fractions mixed) and
the output values; and an average's comparisons with ints against Fraction's."""

from __future__ import annotations

import operator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from ivmstream.services.sketches import folds
from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.expressions import _CMP, compile_expr
from ivmstream.services.sketches.partition import RangeSpec
from ivmstream.services.sketches.values import add, average, mul

WIDTH = 4
numbers = st.one_of(
    st.none(),
    st.integers(-50, 50),
    st.decimals(-50, 50, places=2, allow_nan=False, allow_infinity=False),
)
rows = st.tuples(*[numbers] * WIDTH)
kinds = st.sampled_from(["sum", "count", "count_star", "avg"])


def _expr(draw: st.DrawFn) -> Any:
    """A column read (inlined as ``row[k]``) or a computed expression (called), NULL-aware like SQL's."""
    a, b = draw(st.integers(0, WIDTH - 1)), draw(st.integers(0, WIDTH - 1))
    if draw(st.booleans()):
        return operator.itemgetter(a)
    if draw(st.booleans()):
        return lambda row: mul(row[a], row[b])
    if draw(st.booleans()):  # Decimals and Fractions into one sum (add() mixes them exactly)
        return lambda row: (
            row[a] if type(row[b]) is not Decimal or row[a] is None else Fraction(str(row[a])) / 3
        )
    return lambda row: None if row[a] is None or not row[b] else Fraction(str(row[a])) / Fraction(str(row[b]))


@st.composite
def aggregates(draw: st.DrawFn) -> list[tuple[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(kinds)
        out.append((kind, None if kind == "count_star" else _expr(draw)))
    return out


def _same(a: Any, b: Any) -> bool:
    return bool(type(a) is type(b) and a == b)


@settings(max_examples=150, deadline=None)
@given(
    aggs=aggregates(),
    work=st.lists(st.tuples(rows, st.integers(-3, 3).filter(bool)), max_size=25),
    group=st.lists(st.integers(0, WIDTH - 1), max_size=3),
)
def test_generated_fold_equals_the_loop_and_the_sums(
    aggs: list[tuple[str, Any]], work: list[tuple[tuple[Any, ...], int]], group: list[int]
) -> None:
    node = P.Aggregate(P.Scan("t", None), [operator.itemgetter(i) for i in group], aggs)
    assert node.fast_fold is not None
    fast, loop = P.GroupState(len(aggs)), P.GroupState(len(aggs))
    for row, n in work:
        assert node.key(row) == tuple(row[i] for i in group)
        node.fast_fold(fast, row, n)
        node._fold(loop, row, n)
        assert fast.cnt == loop.cnt and fast.nns == loop.nns
        assert all(_same(a, b) for a, b in zip(fast.sums, loop.sums, strict=True))
        assert all(_same(a, b) for a, b in zip(node.output_values(fast), node._values(loop), strict=True))
    # a capture's loop over one fragment's rows, generated and generic
    groups: dict[tuple[Any, ...], P.GroupState] = {}
    generic: dict[tuple[Any, ...], P.GroupState] = {}
    assert node.fold_rows is not None
    node.fold_rows(groups, work, 8, lambda: P.GroupState(len(aggs)))
    node._fold_rows(generic, work, 8, lambda: P.GroupState(len(aggs)))
    assert groups.keys() == generic.keys()
    for g, a in groups.items():
        b = generic[g]
        assert (a.cnt, a.nns, a.P) == (b.cnt, b.nns, b.P) == (a.cnt, a.nns, 8)
        assert all(_same(x, y) for x, y in zip(a.sums, b.sums, strict=True))
    # brute force: the count, each aggregate's non-NULL count and exact sum over the signed rows
    assert fast.cnt == sum(n for _, n in work)
    for i, (kind, f) in enumerate(aggs):
        if f is None:
            continue
        seen = [(f(row), n) for row, n in work if f(row) is not None]
        assert fast.nns[i] == sum(n for _, n in seen)
        if kind in ("sum", "avg"):
            total: Any = 0
            for v, n in seen:
                total = add(total, v * n)
            assert Fraction(str(fast.sums[i])) == Fraction(str(total))
            if kind == "avg" and fast.nns[i] > 0:
                assert node.output_values(fast)[i] == Fraction(str(total)) / fast.nns[i]


def test_minmax_keeps_the_generic_fold() -> None:
    node = P.Aggregate(
        P.Scan("t", None), [], [("sum", operator.itemgetter(0)), ("min", operator.itemgetter(1))]
    )
    assert node.fast_fold is None


def test_tuple_of_reads_columns_and_calls_expressions() -> None:
    row = (1, Decimal("2.5"), None, "x")
    assert folds.tuple_of([])(row) == ()
    assert folds.tuple_of([operator.itemgetter(3)])(row) == ("x",)
    assert folds.tuple_of([operator.itemgetter(1), lambda r: r[0] + 1, operator.itemgetter(2)])(row) == (
        Decimal("2.5"),
        2,
        None,
    )
    assert folds.column_position(operator.itemgetter(2)) == 2
    assert folds.column_position(operator.itemgetter(1, 2)) is None
    assert folds.column_position(lambda r: r[0]) is None


@given(st.integers(-(10**12), 10**12), st.integers(1, 10**6), st.integers(-(10**7), 10**7))
def test_average_compares_with_ints_as_fraction_does(total: int, count: int, k: int) -> None:
    a, f = average(total, count), Fraction(total, count)
    for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq):
        assert op(a, k) == op(f, k) and op(k, a) == op(k, f)
    assert (a < Fraction(k, 3)) == (f < Fraction(k, 3)) and (a >= 0.5) == (f >= 0.5)


@given(st.integers(-1000, 1000), st.integers(1, 50), st.integers(-1000, 1000), st.integers(1, 50))
def test_averages_compare_equal_as_their_fractions(t1: int, c1: int, t2: int, c2: int) -> None:
    a, b = average(t1, c1), average(t2, c2)
    assert (a == b) == (Fraction(t1, c1) == Fraction(t2, c2)) and (a != b) == (
        Fraction(t1, c1) != Fraction(t2, c2)
    )
    assert a == Fraction(t1, c1) and (a == b) == (hash(a) == hash(b) and a == Fraction(t2, c2))


def _both(sql: str, row: tuple[Any, ...]) -> tuple[Any, Any]:
    """A comparison compiled (a constant on the right takes the inlined form) and the general rule."""
    e = sqlglot.parse_one(sql)
    resolve = lambda node: 0 if isinstance(node, exp.Column) else None  # noqa: E731
    general = _CMP[type(e)](compile_expr(e.this, resolve)(row), compile_expr(e.expression, resolve)(row))
    return compile_expr(e, resolve)(row), general


OPS = st.sampled_from(["<", "<=", ">", ">=", "=", "<>"])


@settings(max_examples=100)
@given(
    op=OPS,
    constant=st.sampled_from(["750", "2.5", "-3"]),
    value=st.none()
    | st.integers(-1000, 1000)
    | st.builds(average, st.integers(-5000, 5000), st.integers(1, 9)),
    left=st.sampled_from(["x", "x + 0", "x * 2"]),
)
def test_comparison_with_a_constant_as_the_general_rule(
    op: str, constant: str, value: Any, left: str
) -> None:
    got, want = _both(f"{left} {op} {constant}", (value,))
    assert got == want and type(got) is type(want)


@given(op=OPS, value=st.none() | st.dates().map(str))
def test_text_comparison_with_a_constant_as_the_general_rule(op: str, value: Any) -> None:
    got, want = _both(f"x {op} '1995-03-15'", (value,))
    assert got == want and type(got) is type(want)


@settings(max_examples=100, deadline=None)
@given(
    aggs=aggregates(),
    batches=st.lists(st.lists(st.tuples(rows, st.integers(-2, 2).filter(bool)), max_size=12), max_size=4),
    group=st.lists(st.integers(0, WIDTH - 1), max_size=2),
    bounds=st.none() | st.lists(st.integers(-40, 40), unique=True, max_size=4).map(sorted),
)
def test_scan_absorb_equals_the_annotated_delta_path(
    aggs: list[tuple[str, Any]],
    batches: list[list[tuple[tuple[Any, ...], int]]],
    group: list[int],
    bounds: Any,
) -> None:
    """Folding a scan's rows straight in gives the groups, fragment counts and output deltas that the
    generic path (the scan's annotated delta, then ``absorb``) gives."""
    spec = None if bounds is None else RangeSpec("t", "c0", 0, tuple(bounds), 3)
    keys = [operator.itemgetter(i) for i in group]
    fast, generic = (P.Aggregate(P.Scan("t", spec), keys, aggs) for _ in range(2))
    assert fast.absorb_scan is not None
    generic.absorb_scan = None
    held: dict[tuple[Any, ...], int] = {}  # deletes take at most what is held (net-consistent batches)
    for batch in batches:
        delta: dict[tuple[Any, ...], int] = {}
        for row, n in batch:
            have = held.get(row, 0) + delta.get(row, 0)
            delta[row] = delta.get(row, 0) + max(n, -have)
        delta = {r: n for r, n in delta.items() if n}
        for r, n in delta.items():
            held[r] = held.get(r, 0) + n
        assert fast.push("t", delta) == generic.push("t", delta) == {}
        assert fast.push("other", delta) == {}
        assert fast.flush() == generic.flush()
        assert fast.groups.keys() == generic.groups.keys()
        for g, a in fast.groups.items():
            b = generic.groups[g]
            assert (a.cnt, a.nns, a.F, a.P) == (b.cnt, b.nns, b.F, b.P)
            assert all(_same(x, y) for x, y in zip(a.sums, b.sums, strict=True))
