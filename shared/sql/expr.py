"""Scalar SQL expressions compiled to Python callables, with their types checked first.

A compiled expression reads column values through getters the caller supplies (one row of one
relation at intake, or an environment of rows), so the same code serves selections, derived columns
and the arithmetic over aggregates. Numbers stay exact where the input is: ``int`` and ``Decimal``
combine exactly; a ``float`` anywhere makes the result a float. Dates are ISO text, so comparing
them compares strings; ``DATE '...' ± INTERVAL 'n' DAY|MONTH|YEAR`` is folded to a date.
"""

from __future__ import annotations

import datetime as dt
import operator
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from ivmstream.sql.errors import SqlError
from ivmstream.sql.source import Statement

Fn = Callable[[Any], Any]
ColumnRef = tuple[str, str]  # (alias, column)
Resolve = Callable[[exp.Column], tuple[ColumnRef, str]]  # a column -> its reference and model type
Getter = Callable[[ColumnRef], Fn]

NUMERIC = frozenset({"int", "float", "exact", "bool"})
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
}

# The binary operators a predicate compiled to Python source writes as Python's own.
PYTHON_OPERATORS: dict[type, str] = {
    exp.EQ: "==",
    exp.NEQ: "!=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.And: "and",
    exp.Or: "or",
}


def constant(value: Any) -> Fn:
    """A function of anything returning ``value``."""
    return lambda _r: value


def converted(get: Fn, convert: Callable[[Any], Any]) -> Fn:
    """``get`` followed by ``convert`` (its parts kept, for callers that call them without the frame)."""
    fn = lambda r: convert(get(r))  # noqa: E731
    fn.parts = (get, convert)  # type: ignore[attr-defined]
    return fn


def by_column(ref: ColumnRef) -> Fn:
    """The getter of a column from one relation's row (a dict by column name)."""
    return operator.itemgetter(ref[1])


def all_of(tests: list[Fn]) -> Fn:
    """A conjunction of row tests."""
    return lambda r: all(t(r) for t in tests)


def position_of(stmt: Statement, node: exp.Expression) -> Any:
    """The file position of a node (its first identifier or literal with a known place)."""
    for sub in node.walk():
        meta = getattr(sub, "meta", None) or {}
        if "line" in meta:
            return stmt.at(int(meta["line"]), int(meta["col"]) - len(str(sub.this if sub.this else "")) + 1)
        if isinstance(sub, exp.Column) and "line" in (sub.this.meta or {}):
            m = sub.this.meta
            return stmt.at(int(m["line"]), int(m["col"]) - len(sub.sql()) + 1)
    return stmt.position(0)


def _num(x: Any, y: Any) -> tuple[Any, Any]:
    if type(x) is float or type(y) is float:
        return float(x), float(y)
    return x, y


def _add(x: Any, y: Any) -> Any:
    a, b = _num(x, y)
    return a + b


def _sub(x: Any, y: Any) -> Any:
    a, b = _num(x, y)
    return a - b


def _mul(x: Any, y: Any) -> Any:
    a, b = _num(x, y)
    return a * b


def _div(x: Any, y: Any) -> Any:
    if x is None or y is None or y == 0:
        return None
    if type(x) is float or type(y) is float:
        return float(x) / float(y)
    return Decimal(x) / Decimal(y)


_ARITH: dict[type, Callable[[Any, Any], Any]] = {exp.Add: _add, exp.Sub: _sub, exp.Mul: _mul, exp.Div: _div}


def number_literal(text: str) -> int | Decimal:
    """A SQL number: an integer, else an exact decimal."""
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(text) from None


def _like(pattern: str) -> re.Pattern[str]:
    out = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.compile(out, re.DOTALL)


def _date_text(node: exp.Expression) -> str | None:
    """The ISO date a constant date expression denotes (DATE('x'), DATE 'x', CAST('x' AS DATE),
    ± INTERVAL), or None if the node is not one."""
    if isinstance(node, exp.Paren):
        return _date_text(node.this)
    if isinstance(node, exp.Date | exp.TsOrDsToDate | exp.DateStrToDate) and isinstance(
        node.this, exp.Literal
    ):
        return str(node.this.this)
    if (
        isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.DATE
        and isinstance(node.this, exp.Literal)
    ):
        return str(node.this.this)
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
        base = _date_text(node.this)
        if base is None:
            return None
        iv = node.expression
        n = int(str(iv.this.this))
        unit = str(iv.unit.this if iv.unit else "DAY").upper().rstrip("S")
        return _shift(base, -n if isinstance(node, exp.Sub) else n, unit)
    return None


def _shift(day: str, n: int, unit: str) -> str:
    d = dt.date.fromisoformat(day)
    if unit == "DAY":
        return (d + dt.timedelta(days=n)).isoformat()
    months = n * (12 if unit == "YEAR" else 1)
    if unit not in ("MONTH", "YEAR"):
        raise ValueError(unit)
    y, m = divmod(d.month - 1 + months, 12)
    return d.replace(year=d.year + y, month=m + 1).isoformat()


class Compiler:
    """Compiles expressions of one statement: ``resolve`` names columns and their types, ``getter``
    turns a column reference into a function of the evaluation's argument."""

    def __init__(self, stmt: Statement, resolve: Resolve, getter: Getter) -> None:
        self.stmt = stmt
        self.resolve = resolve
        self.getter = getter

    def fail(self, node: exp.Expression, message: str) -> SqlError:
        return SqlError(message, position_of(self.stmt, node))

    def type_of(self, node: exp.Expression) -> str:
        """The model type of a scalar expression; SqlError for a type mismatch."""
        if _date_text(node) is not None:
            return "date"
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Column):
            return self.resolve(node)[1]
        if isinstance(node, exp.Literal):
            return "str" if node.is_string else ("int" if re.fullmatch(r"\d+", str(node.this)) else "exact")
        if isinstance(node, exp.Boolean):
            return "bool"
        if isinstance(node, exp.Neg):
            return self._numeric(node.this, "negation")
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            a = self._numeric(node.this, node.key)
            b = self._numeric(node.expression, node.key)
            if isinstance(node, exp.Div):
                return "float" if "float" in (a, b) else "exact"
            return "float" if "float" in (a, b) else "int" if a == b == "int" else "exact"
        if isinstance(node, exp.Case | exp.If):
            branches = (
                [i.args["true"] for i in node.args.get("ifs") or []]
                if isinstance(node, exp.Case)
                else [node.args["true"]]
            )
            default = node.args.get("default") or node.args.get("false")
            types = {self.type_of(b) for b in [*branches, *([default] if default is not None else [])]}
            for cond in (
                [i.this for i in node.args.get("ifs") or []] if isinstance(node, exp.Case) else [node.this]
            ):
                self.check_condition(cond)
            if types <= NUMERIC:
                return "float" if "float" in types else "exact" if "exact" in types else "int"
            if len(types) == 1:
                return types.pop()
            raise self.fail(node, f"type mismatch: CASE branches of types {', '.join(sorted(types))}")
        if isinstance(node, exp.Greatest | exp.Least) or (
            isinstance(node, exp.Anonymous) and str(node.this).upper() in ("LISTMAX", "LISTMIN")
        ):
            args = (
                [node.this, *node.expressions]
                if isinstance(node, exp.Greatest | exp.Least)
                else node.expressions
            )
            types = {self._numeric(a, "LISTMAX") for a in args}
            return "float" if "float" in types else "exact" if "exact" in types else "int"
        raise self.fail(node, f"unsupported expression {node.sql()!r}")

    def _numeric(self, node: exp.Expression, what: str) -> str:
        t = self.type_of(node)
        if t not in NUMERIC:
            raise self.fail(node, f"type mismatch: {what} of {node.sql()!r}, which is {t}, not a number")
        return t

    def _comparable(self, a: exp.Expression, b: exp.Expression, node: exp.Expression) -> None:
        ta, tb = self.type_of(a), self.type_of(b)
        if ta in NUMERIC and tb in NUMERIC:
            return
        if {ta, tb} <= {"str", "date"}:
            return
        raise self.fail(node, f"type mismatch: {a.sql()!r} is {ta}, {b.sql()!r} is {tb}")

    def check_condition(self, node: exp.Expression) -> None:
        """Type-check a boolean condition."""
        if isinstance(node, exp.Paren):
            self.check_condition(node.this)
        elif isinstance(node, exp.And | exp.Or):
            self.check_condition(node.this)
            self.check_condition(node.expression)
        elif isinstance(node, exp.Not):
            self.check_condition(node.this)
        elif type(node) in _CMP:
            self._comparable(node.this, node.expression, node)
        elif isinstance(node, exp.Between):
            self._comparable(node.this, node.args["low"], node)
            self._comparable(node.this, node.args["high"], node)
        elif isinstance(node, exp.In):
            for e in node.expressions:
                self._comparable(node.this, e, node)
        elif isinstance(node, exp.Like):
            if self.type_of(node.this) != "str" or not (
                isinstance(node.expression, exp.Literal) and node.expression.is_string
            ):
                raise self.fail(
                    node, f"type mismatch: LIKE needs a text column and a text pattern: {node.sql()!r}"
                )
        elif isinstance(node, exp.Boolean):
            return
        else:
            raise self.fail(node, f"unsupported condition {node.sql()!r}")

    def compile(self, node: exp.Expression) -> Fn:
        """A function of the evaluation argument computing the node (types already checked)."""
        date = _date_text(node)
        if date is not None:
            return constant(date)
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            return self.getter(self.resolve(node)[0])
        if isinstance(node, exp.Literal):
            value: Any = str(node.this) if node.is_string else number_literal(str(node.this))
            return constant(value)
        if isinstance(node, exp.Boolean):
            flag = bool(node.this)
            return lambda _r: flag
        if isinstance(node, exp.Neg):
            f = self.compile(node.this)
            return lambda r: -f(r)
        arith = _ARITH.get(type(node))
        if arith is not None:
            a, b = self.compile(node.this), self.compile(node.expression)
            return lambda r: arith(a(r), b(r))
        cmp = _CMP.get(type(node))
        if cmp is not None:
            a, b = self.compile(node.this), self.compile(node.expression)
            return lambda r: cmp(*_num(a(r), b(r)))
        if isinstance(node, exp.And):
            a, b = self.compile(node.this), self.compile(node.expression)
            return lambda r: a(r) and b(r)
        if isinstance(node, exp.Or):
            a, b = self.compile(node.this), self.compile(node.expression)
            return lambda r: a(r) or b(r)
        if isinstance(node, exp.Not):
            a = self.compile(node.this)
            return lambda r: not a(r)
        if isinstance(node, exp.Between):
            x, lo, hi = (self.compile(node.args[k]) for k in ("this", "low", "high"))

            def between(r: Any) -> bool:
                v = x(r)
                a, b = _num(lo(r), v)
                c, d = _num(v, hi(r))
                return bool(a <= b and c <= d)

            return between
        if isinstance(node, exp.In):
            x = self.compile(node.this)
            values = [self.compile(e)(None) for e in node.expressions]
            return lambda r: x(r) in values
        if isinstance(node, exp.Like):
            x = self.compile(node.this)
            pattern = _like(str(node.expression.this))
            return lambda r: pattern.fullmatch(x(r)) is not None
        if isinstance(node, exp.Case | exp.If):
            return self._case(node)
        if isinstance(node, exp.Greatest | exp.Least | exp.Anonymous):
            args = (
                [node.this, *node.expressions]
                if isinstance(node, exp.Greatest | exp.Least)
                else node.expressions
            )
            fs = [self.compile(a) for a in args]
            pick = min if isinstance(node, exp.Least) or str(node.this).upper() == "LISTMIN" else max
            return lambda r: pick(f(r) for f in fs)
        raise self.fail(node, f"unsupported expression {node.sql()!r}")

    def _case(self, node: exp.Expression) -> Fn:
        if isinstance(node, exp.If):
            pairs = [(self.compile(node.this), self.compile(node.args["true"]))]
            default_node = node.args.get("false")
        else:
            pairs = [(self.compile(i.this), self.compile(i.args["true"])) for i in node.args.get("ifs") or []]
            default_node = node.args.get("default")
        default = self.compile(default_node) if default_node is not None else (lambda _r: None)

        def run(r: Any) -> Any:
            for cond, value in pairs:
                if cond(r):
                    return value(r)
            return default(r)

        return run
