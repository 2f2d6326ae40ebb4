"""Compile sqlglot expressions into Python functions over a row tuple.

A ``Resolver`` maps a sub-expression to the row position that already holds its value (a column, a
group expression, an aggregate call) or returns None to compile it from its parts. Anything outside
the supported class is a ``QueryError`` naming the construct (docs/sketches/algorithm.md §1.2).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ivmstream.services.sketches.folds import column_position
from ivmstream.services.sketches.values import add, div, like, mul, neg, sub, tri_and, tri_not, tri_or

Row = tuple[Any, ...]
Expr = Callable[[Row], Any]
Resolver = Callable[[exp.Expression], int | None]


class QueryError(ValueError):
    """The query is outside the supported class or refers to something that does not exist."""


def literal(e: exp.Literal) -> Any:
    text = e.this
    if e.is_string:
        return text
    if any(c in text for c in ".eE"):
        d = Decimal(text)
        return int(d) if d == d.to_integral_value() else d
    return int(text)


def year(value: Any) -> Any:
    """EXTRACT(YEAR FROM d) of a date held as ISO text (as TPC-H stores dates) or a date object."""
    if value is None:
        return None
    if isinstance(value, str):
        return int(value[:4])
    return value.year


def _compare(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def cmp(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        return op(a, b)

    return cmp


_ARITH: dict[type, Callable[[Any, Any], Any]] = {exp.Add: add, exp.Sub: sub, exp.Mul: mul, exp.Div: div}
_CMP: dict[type, Callable[[Any, Any], Any]] = {
    exp.EQ: _compare(operator.eq),
    exp.NEQ: _compare(operator.ne),
    exp.GT: _compare(operator.gt),
    exp.GTE: _compare(operator.ge),
    exp.LT: _compare(operator.lt),
    exp.LTE: _compare(operator.le),
}
_OPS: dict[type, Callable[[Any, Any], Any]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}


def _against(op: Callable[[Any, Any], Any], a: Expr, value: Any) -> Expr:
    """``a op constant`` (HAVING AVG(c) < 750): NULL when ``a`` is, as ``_compare`` gives (the constant
    is not NULL), with the column read and the constant inlined."""
    pos = column_position(a)
    if pos is not None:

        def column_against(row: Row) -> Any:
            x = row[pos]
            return None if x is None else op(x, value)

        return column_against

    def against(row: Row) -> Any:
        x = a(row)
        return None if x is None else op(x, value)

    return against


AGGREGATES: dict[type, str] = {
    exp.Sum: "sum",
    exp.Count: "count",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}


def describe(e: exp.Expression) -> str:
    return f"{e.key.upper()} ({e.sql()})"


def unsupported(e: exp.Expression) -> QueryError:
    if isinstance(e, exp.Subquery | exp.Exists | exp.Select):
        return QueryError(f"nested subqueries are not supported: {e.sql()}")
    if isinstance(e, exp.Window):
        return QueryError(f"window functions are not supported: {e.sql()}")
    return QueryError(f"unsupported construct {describe(e)}")


def compile_expr(e: exp.Expression, resolve: Resolver) -> Expr:
    pos = resolve(e)
    if pos is not None:
        return operator.itemgetter(pos)
    if isinstance(e, exp.Paren):
        return compile_expr(e.this, resolve)
    if isinstance(e, exp.Column):
        raise QueryError(f"unknown column {e.sql()}")
    if isinstance(e, exp.Literal):
        value = literal(e)
        return lambda _row: value
    if isinstance(e, exp.Null):
        return lambda _row: None
    if isinstance(e, exp.Boolean):
        truth = bool(e.this)
        return lambda _row: truth
    if (
        isinstance(e, exp.Cast)
        and isinstance(e.this, exp.Literal)
        and e.this.is_string
        and e.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
    ):
        text = e.this.this  # dates compare as ISO text, as TPC-H stores them
        return lambda _row: text
    if type(e) in _ARITH:
        f, a, b = _ARITH[type(e)], compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        return lambda row: f(a(row), b(row))
    if isinstance(e, exp.Neg):
        a = compile_expr(e.this, resolve)
        return lambda row: neg(a(row))
    if type(e) in _CMP:
        f, a, b = _CMP[type(e)], compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        if isinstance(e.expression, exp.Literal) and resolve(e.expression) is None:
            return _against(_OPS[type(e)], a, literal(e.expression))
        return lambda row: f(a(row), b(row))
    if isinstance(e, exp.And):
        a, b = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        return lambda row: tri_and(a(row), b(row))
    if isinstance(e, exp.Or):
        a, b = compile_expr(e.this, resolve), compile_expr(e.expression, resolve)
        return lambda row: tri_or(a(row), b(row))
    if isinstance(e, exp.Not):
        a = compile_expr(e.this, resolve)
        return lambda row: tri_not(a(row))
    if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
        a = compile_expr(e.this, resolve)
        return lambda row: a(row) is None
    if isinstance(e, exp.Between):
        v, lo, hi = (compile_expr(x, resolve) for x in (e.this, e.args["low"], e.args["high"]))
        ge, le = _CMP[exp.GTE], _CMP[exp.LTE]
        return lambda row: tri_and(ge(v(row), lo(row)), le(v(row), hi(row)))
    if isinstance(e, exp.In) and not e.args.get("query"):
        v = compile_expr(e.this, resolve)
        options = [compile_expr(x, resolve) for x in e.expressions]
        eq = _CMP[exp.EQ]

        def member(row: Row) -> Any:
            x = v(row)
            out: Any = False
            for o in options:
                out = tri_or(out, eq(x, o(row)))
            return out

        return member
    if isinstance(e, exp.Extract) and e.this.name.upper() == "YEAR":
        a = compile_expr(e.expression, resolve)
        return lambda row: year(a(row))
    if isinstance(e, exp.Like) and isinstance(e.expression, exp.Literal):
        a = compile_expr(e.this, resolve)
        pattern = e.expression.this
        return lambda row: like(a(row), pattern)
    if isinstance(e, exp.Case) and e.this is None:
        ifs = [(compile_expr(i.this, resolve), compile_expr(i.args["true"], resolve)) for i in e.args["ifs"]]
        default = compile_expr(e.args["default"], resolve) if e.args.get("default") else (lambda _row: None)

        def case(row: Row) -> Any:
            for cond, then in ifs:
                if cond(row) is True:
                    return then(row)
            return default(row)

        return case
    if type(e) in AGGREGATES:
        raise QueryError(f"aggregate {e.sql()} is not allowed here")
    raise unsupported(e)
