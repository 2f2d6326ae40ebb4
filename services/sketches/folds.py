"""An aggregation's per-row steps generated as Python source once per plan (docs/sketches/algorithm.md
§2.4.6): the group key, the fold of one row into a group's counts and exact sums, and the output values.

The generic loops in ``plan.Aggregate`` look up each aggregate's kind and call each expression per row;
here every aggregate is one straight-line statement, and an expression that only reads a column (an
``operator.itemgetter``) becomes an index into the row. The steps compute exactly what the generic
loops compute (same operations, same order); ``tests/unit/sketches/test_sketches_folds.py`` checks
them against the generic loops and against sums over the rows. MIN/MAX keep the generic fold (their
top-m buffers record changes for the checkpoint as they go).
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ivmstream.services.sketches.values import add, average

Row = tuple[Any, ...]
Expr = Callable[[Row], Any]
Fold = Callable[[Any, Row, int], None]  # (GroupState, row, multiplicity)
FoldRows = Callable[[dict[Row, Any], Iterable[tuple[Row, int]], int, Callable[[], Any]], None]
AbsorbScan = Callable[..., None]


def column_position(f: Expr | None) -> int | None:
    """The row position an expression reads if it is a plain single-column ``itemgetter``, else None."""
    if type(f) is not operator.itemgetter:
        return None
    reduced = f.__reduce__()  # (itemgetter, the positions it was made with)
    args: tuple[Any, ...] = reduced[1] if isinstance(reduced, tuple) else ()
    if len(args) == 1 and type(args[0]) is int:
        return int(args[0])
    return None


def _compile(name: str, lines: list[str], env: dict[str, Any]) -> Any:
    program = compile("\n".join(lines), f"<sketches {name}>", "exec")
    exec(program, env)  # the source is built above from row positions and fixed templates only
    return env[name]


def _read(f: Expr, slot: str, env: dict[str, Any]) -> str:
    """The expression's source: ``row[k]`` for a column read, else a call of the function itself."""
    pos = column_position(f)
    if pos is not None:
        return f"row[{pos}]"
    env[slot] = f
    return f"{slot}(row)"


def _tuple_source(exprs: Sequence[Expr], env: dict[str, Any]) -> str:
    parts = [_read(f, f"e{i}", env) for i, f in enumerate(exprs)]
    return "()" if not parts else f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def tuple_of(exprs: Sequence[Expr]) -> Callable[[Row], Row]:
    """The tuple of the expressions' values over a row (GROUP BY values, projections)."""
    env: dict[str, Any] = {}
    return _compile("key", ["def key(row):", f"    return {_tuple_source(exprs, env)}"], env)  # type: ignore[no-any-return]


def _fold_body(aggs: Sequence[tuple[str, Expr | None]], env: dict[str, Any], indent: str) -> list[str]:
    """Statements adding ``n`` copies of ``row`` to the state ``st``."""
    lines = ["st.cnt += n", "nns = st.nns", "sums = st.sums"]
    for i, (kind, f) in enumerate(aggs):
        if f is None:
            continue  # COUNT(*): the group's count
        lines += [f"v = {_read(f, f'a{i}', env)}", "if v is not None:", f"    nns[{i}] += n"]
        if kind in ("sum", "avg"):
            lines += [
                f"    s = sums[{i}]",
                "    try:",
                f"        sums[{i}] = s + v * n",
                "    except TypeError:",  # NULL or Decimal with Fraction: add() decides, as the loop does
                f"        sums[{i}] = add(s, v * n)",
            ]
    return [indent + line for line in lines]


def fold(aggs: Sequence[tuple[str, Expr | None]]) -> Fold | None:
    """``fold(st, row, n)``: add ``n`` copies of ``row`` to a group's count, non-NULL counts and sums
    (as ``Aggregate._fold``); None when an aggregate is MIN or MAX."""
    if any(kind in ("min", "max") for kind, _ in aggs):
        return None
    env: dict[str, Any] = {"add": add}
    return _compile("fold", ["def fold(st, row, n):", *_fold_body(aggs, env, "    ")], env)  # type: ignore[no-any-return]


def fold_rows(group: Sequence[Expr], aggs: Sequence[tuple[str, Expr | None]]) -> FoldRows | None:
    """``fold_rows(groups, items, p, new)``: each ``(row, n)`` of ``items`` folded (as ``fold``) into
    its group's state in ``groups`` (``new()`` when absent), whose sketch takes ``p``: a capture's loop
    over one fragment's rows. None when an aggregate is MIN or MAX."""
    if any(kind in ("min", "max") for kind, _ in aggs):
        return None
    env: dict[str, Any] = {"add": add}
    lines = [
        "def fold_rows(groups, items, p, new):",
        "    get = groups.get",
        "    for row, n in items:",
        f"        g = {_tuple_source(group, env)}",
        "        st = get(g)",
        "        if st is None:",
        "            st = groups[g] = new()",
        "        st.P |= p",
        *_fold_body(aggs, env, "        "),
    ]
    return _compile("fold_rows", lines, env)  # type: ignore[no-any-return]


def absorb_scan(
    group: Sequence[Expr], aggs: Sequence[tuple[str, Expr | None]], partition: tuple[int, int, Any] | None
) -> AbsorbScan | None:
    """``absorb(items, groups, before, touched, image, new, unset)``: ``Aggregate.absorb`` over a scan's
    delta taken straight from the table's ``(row, n)`` pairs, each row's fragment bit computed inline
    (``partition``: the column's position, the table's first global fragment id and the sorted
    boundaries; None: unpartitioned, no fragment). None when an aggregate is MIN or MAX."""
    if any(kind in ("min", "max") for kind, _ in aggs):
        return None
    env: dict[str, Any] = {"add": add}
    lines = [
        "def absorb(items, groups, before, touched, image, new, unset):",
        "    get = groups.get",
        "    first_touch = touched.get",
        "    for row, n in items:",
        f"        g = {_tuple_source(group, env)}",
        "        st = get(g)",
        "        mark = first_touch(g)",
        "        if mark is None:",  # the pre-batch image, taken at first touch
        "            before[g] = st.image if st is not None and st.image is not unset else image(g, st)",
        "            mark = touched[g] = set()",
        "        if st is None:",
        "            st = groups[g] = new()",
        *_fold_body(aggs, env, "        "),
    ]
    if partition is not None:
        position, offset, env["BOUNDS"] = partition
        env["bisect_right"] = bisect_right
        lines += [
            f"        x = row[{position}]",
            f"        r = {offset} + (0 if x is None else bisect_right(BOUNDS, x))",
            "        F = st.F",
            "        F[r] = F.get(r, 0) + n",
            "        mark.add(r)",
        ]
    return _compile("absorb", lines, env)  # type: ignore[no-any-return]


def values(aggs: Sequence[tuple[str, Expr | None]]) -> Callable[[Any], Row]:
    """``values(st)``: a group's aggregate values in output order (as ``Aggregate._values``)."""
    env: dict[str, Any] = {"average": average}
    parts = []
    for i, (kind, _) in enumerate(aggs):
        if kind == "count_star":
            parts.append("st.cnt")
        elif kind == "count":
            parts.append(f"nns[{i}]")
        elif kind == "sum":
            parts.append(f"(sums[{i}] if nns[{i}] else None)")
        elif kind == "avg":
            parts.append(f"(average(sums[{i}], nns[{i}]) if nns[{i}] else None)")
        else:
            parts.append(f"(buffers[{i}].first() if buffers[{i}] is not None else None)")
    body = "()" if not parts else f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
    lines = ["def values(st):", "    nns = st.nns", "    sums = st.sums", "    buffers = st.buffers"]
    lines.append(f"    return {body}")
    return _compile("values", lines, env)  # type: ignore[no-any-return]
