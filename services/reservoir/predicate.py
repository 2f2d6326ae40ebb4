"""The predicate language θ over join-result columns (docs/reservoir/algorithm.md §1.3).

A small, safe subset of Python expression syntax: column names, int/float/string literals,
arithmetic (+ - * // %), comparisons (chained too), ``and``/``or``/``not`` and parentheses. The text is
parsed with ``ast`` and compiled into closures over a whitelist of node types: nothing is evaluated
by the interpreter, so a config cannot run code.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Row = Sequence[Any]
Compiled = Callable[[Row], Any]

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class PredicateError(ValueError):
    """A predicate text outside the language, or naming an unknown column."""


def compile_predicate(text: str, columns: Sequence[str]) -> Callable[[Row], bool]:
    """θ as a function of a result row (values in ``columns`` order); raises PredicateError."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise PredicateError(f"predicate {text!r} is not an expression: {exc.msg}") from None
    position = {c: i for i, c in enumerate(columns)}
    body = _compile(tree.body, position)

    def theta(row: Row) -> bool:
        try:
            return bool(body(row))
        except (TypeError, ZeroDivisionError):
            return False  # comparing a string with a number, or x // 0: the result does not qualify

    return theta


def predicate_columns(text: str) -> list[str]:
    """The column names a predicate reads (for validation messages)."""
    return sorted({n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)})


def _compile(node: ast.AST, position: Mapping[str, int]) -> Compiled:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        value = node.value
        return lambda row: value
    if isinstance(node, ast.Name):
        if node.id not in position:
            raise PredicateError(f"predicate names {node.id!r}, which is not a column of the join result")
        i = position[node.id]
        return lambda row: row[i]
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, position) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda row: all(p(row) for p in parts)
        return lambda row: any(p(row) for p in parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        inner = _compile(node.operand, position)
        if isinstance(node.op, ast.Not):
            return lambda row: not inner(row)
        return lambda row: -inner(row)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        op = _ARITH[type(node.op)]
        left, right = _compile(node.left, position), _compile(node.right, position)
        return lambda row: op(left(row), right(row))
    if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        terms = [_compile(node.left, position)] + [_compile(c, position) for c in node.comparators]
        ops = [_COMPARE[type(o)] for o in node.ops]

        def compare(row: Row) -> bool:
            values = [t(row) for t in terms]
            return all(op(values[i], values[i + 1]) for i, op in enumerate(ops))

        return compare
    raise PredicateError(
        f"predicate element {ast.dump(node)[:60]!r} is outside the language "
        "(columns, literals, + - * // %, comparisons, and/or/not)"
    )
