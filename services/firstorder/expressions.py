"""The expression language of predicates and aggregate arguments (docs/firstorder/algorithm.md §2).

A safe subset of Python expression syntax over the join's variables: names, int/float/string literals,
``None`` (NULL), ``+ - * /``, unary minus, comparisons (chained, ``in (constants)``),
``and``/``or``/``not``, ``a if c else b`` and ``min(...)``/``max(...)``. The text is parsed with ``ast``
and compiled into closures over a whitelist of node types: nothing is evaluated by the interpreter, so a
config cannot run code. SQL's NULL is ``None``: ``x / 0`` is None, arithmetic with None is None, and
conditions follow SQL's three-valued logic (a comparison with None is unknown, ``None``; ``not`` of
unknown is unknown; ``and`` is false if any operand is false, else unknown if any is; ``or`` is true if
any operand is true, else unknown if any is), so a row qualifies only when its predicate is true, as in
Spark SQL and DuckDB. ``a if c else b`` takes ``b`` when ``c`` is unknown (CASE), ``min``/``max`` skip
None (LEAST/GREATEST), and an aggregate skips None (so a predicate or argument never fails on a row).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Env = Sequence[Any]
Compiled = Callable[[Env], Any]

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _div(a: Any, b: Any) -> Any:
    return None if b == 0 else a / b


_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _div,
}
_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max}
_LISTED = (int, float, str, type(None))  # the constants an ``in`` tuple may list


class ExpressionError(ValueError):
    """An expression outside the language, or naming an unknown variable."""


@dataclass(frozen=True)
class Expression:
    """A compiled expression: its function of the environment and the variables it reads."""

    text: str
    fn: Compiled
    variables: frozenset[str]


def parse(text: str) -> ast.expr:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExpressionError(f"{text!r} is not an expression: {exc.msg}") from None


def conjuncts(text: str) -> list[str]:
    """A predicate's top-level ``and`` operands (each placed at the first probe that binds its variables)."""
    tree = parse(text)
    if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And):
        return [ast.unparse(v) for v in tree.values]
    return [text.strip()]


def compile_expression(text: str, position: Mapping[str, int]) -> Expression:
    """``text`` as a function of an environment holding each variable at ``position[name]``."""
    tree = parse(text)
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
    unknown = sorted(names - set(position) - set(_CALLS))
    if unknown:
        raise ExpressionError(
            f"{text!r} names {', '.join(map(repr, unknown))}, not a variable of the join "
            f"(variables: {', '.join(position)})"
        )
    fn, _nullable = _compile(tree, position)
    return Expression(text, fn, frozenset(n for n in names if n in position))


def _compile(node: ast.AST, position: Mapping[str, int]) -> tuple[Compiled, bool]:
    """(function, whether it may give None)."""
    if isinstance(node, ast.Constant) and node.value is None:
        return (lambda env: None), True  # NULL (a CASE without ELSE)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        value = node.value
        return (lambda env: value), False
    if isinstance(node, ast.Name) and node.id in position:
        return operator.itemgetter(position[node.id]), True  # a row's value may be None
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, position)[0] for v in node.values]
        return (_and(parts) if isinstance(node.op, ast.And) else _or(parts)), True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _compile(node.operand, position)[0]
        return (lambda env: None if (v := inner(env)) is None else not v), True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner, nullable = _compile(node.operand, position)
        sign = -1 if isinstance(node.op, ast.USub) else 1
        if nullable:
            return (lambda env: None if (v := inner(env)) is None else sign * v), True
        return (lambda env: sign * inner(env)), False
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return _binary(_ARITH[type(node.op)], node, position)
    if isinstance(node, ast.Compare):
        return _compare(node, position), True
    if isinstance(node, ast.IfExp):
        test = _compile(node.test, position)[0]  # unknown (None) takes the else branch, as CASE does
        (yes, n1), (no, n2) = _compile(node.body, position), _compile(node.orelse, position)
        return (lambda env: yes(env) if test(env) else no(env)), n1 or n2
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CALLS
        and node.args
        and not node.keywords
    ):
        pick = _CALLS[node.func.id]
        compiled = [_compile(a, position) for a in node.args]
        args = [c[0] for c in compiled]
        if any(c[1] for c in compiled):

            def call(env: Env) -> Any:
                values = [v for a in args if (v := a(env)) is not None]  # LEAST/GREATEST skip NULLs
                return pick(values) if values else None

            return call, True
        return (lambda env: pick([a(env) for a in args])), False
    raise ExpressionError(
        f"{ast.unparse(node)!r} is outside the language (variables, literals, + - * /, comparisons, "
        "in (constants), and/or/not, a if c else b, min/max)"
        if isinstance(node, ast.expr)
        else f"{type(node).__name__} is outside the language"
    )


def _binary(
    op: Callable[[Any, Any], Any], node: ast.BinOp, position: Mapping[str, int]
) -> tuple[Compiled, bool]:
    (left, n1), (right, n2) = _compile(node.left, position), _compile(node.right, position)
    nullable = n1 or n2 or op is _div
    if n1 or n2:

        def guarded(env: Env) -> Any:
            a, b = left(env), right(env)
            return None if a is None or b is None else op(a, b)

        return guarded, nullable
    return (lambda env: op(left(env), right(env))), nullable


def _and(parts: Sequence[Compiled]) -> Compiled:
    """SQL's AND: false if an operand is false, else unknown (None) if one is, else true."""

    def conjunction(env: Env) -> bool | None:
        unknown = False
        for p in parts:
            v = p(env)
            if v is None:
                unknown = True
            elif not v:
                return False
        return None if unknown else True

    return conjunction


def _or(parts: Sequence[Compiled]) -> Compiled:
    """SQL's OR: true if an operand is true, else unknown (None) if one is, else false."""

    def disjunction(env: Env) -> bool | None:
        unknown = False
        for p in parts:
            v = p(env)
            if v is None:
                unknown = True
            elif v:
                return True
        return None if unknown else False

    return disjunction


def _compare(node: ast.Compare, position: Mapping[str, int]) -> Compiled:
    """A comparison with None is unknown (None); a chain ``a < b < c`` is ``a < b and b < c`` (SQL's
    AND over the links); a text compared with a number is unknown too (SQL has no answer for it)."""
    left = _compile(node.left, position)[0]
    if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
        right = node.comparators[0]
        if (
            len(node.ops) != 1
            or not isinstance(right, ast.Tuple | ast.List)
            or not all(isinstance(e, ast.Constant) and type(e.value) in _LISTED for e in right.elts)
        ):
            raise ExpressionError(f"{ast.unparse(node)!r}: 'in' takes one tuple of constants, unchained")
        values = frozenset(e.value for e in right.elts if isinstance(e, ast.Constant))
        null_listed = None in values
        negated = isinstance(node.ops[0], ast.NotIn)

        def member(env: Env) -> bool | None:
            v = left(env)
            if v is None:
                return None
            if v in values:
                return not negated
            return None if null_listed else negated  # x IN (.., NULL) is unknown when x is not listed

        return member
    steps: list[tuple[Callable[[Any, Any], bool], Compiled]] = []
    for op, right in zip(node.ops, node.comparators, strict=True):
        if type(op) not in _COMPARE:
            raise ExpressionError(f"{ast.unparse(node)!r}: {type(op).__name__} is outside the language")
        steps.append((_COMPARE[type(op)], _compile(right, position)[0]))

    def compare(env: Env) -> bool | None:
        a = left(env)
        unknown = False
        for test, right_fn in steps:
            b = right_fn(env)
            if a is None or b is None:
                unknown = True
            else:
                try:
                    if not test(a, b):
                        return False
                except TypeError:
                    unknown = True
            a = b
        return None if unknown else True

    return compare
