"""Reusing a sketch across instances of one query template (docs/sketches/algorithm.md §2.7.1).

A sketch maintained for instance Q1 may skip data for another instance Q2 of the same template (the
same query with other constants) when Q2's result can only draw on data Q1's result drew on:

* a HAVING constant may differ when Q2's conjunct implies Q1's (``SUM(x) > 200`` from ``> 100``,
  a ``BETWEEN`` interval inside Q1's): Q2's groups are a subset of Q1's, whose data the sketch holds;
* ``LIMIT k2`` with ``k2 <= k1`` and the same ORDER BY: Q2's rows are a prefix of Q1's (then no other
  constant may differ: a stricter filter under a LIMIT lets rows beyond Q1's top-k move up);
* a WHERE constant only when Q1 is safe by S1 (monotone, no HAVING or LIMIT) and Q2's conjunct implies
  Q1's: every Q2 group's rows are among the same Q1 group's rows. For a HAVING or top-k query a WHERE
  constant changes the aggregates and ranks, so it is not reusable.

Every other constant must be equal. Only top-level conjuncts (under AND) compare by implication.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import exp

from ivmstream.services.sketches.expressions import QueryError


def _template(tree: exp.Expression) -> str:
    return tree.copy().transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n).sql()


def _value(lit: exp.Literal) -> Any:
    if lit.is_string:
        return lit.this  # ISO dates and text compare as strings, as SQL compares them
    try:
        return Decimal(lit.this)
    except InvalidOperation:
        return lit.this


def _clause(node: exp.Expression) -> tuple[str, Any]:
    """The clause a literal sits in (where, having, limit, other) and the comparison it is an operand of,
    when that comparison is a top-level conjunct of the clause."""
    operand: Any = node
    if isinstance(node.parent, exp.Cast):  # DATE '...' is a cast of a string literal
        operand = node.parent
    comparison = operand.parent
    above = comparison
    while above is not None and not isinstance(above, exp.Where | exp.Having | exp.Limit | exp.Select):
        if above is not comparison and not isinstance(above, exp.And | exp.Paren):
            comparison = None  # under OR / NOT / arithmetic: no implication is claimed
        above = above.parent
    kind = type(above).__name__.lower() if above is not None else "other"
    if kind == "select":
        kind = "other"
    if kind == "limit":
        return kind, None
    if comparison is None or operand.arg_key not in ("this", "expression", "low", "high"):
        return kind, None
    return kind, comparison


def _implies(cmp: exp.Expression, operand_key: str, old: Any, new: Any) -> bool:
    """Q2's conjunct (with ``new``) implies Q1's (with ``old``), the rest of the conjunct being equal."""
    if type(old) is not type(new):
        return False
    if isinstance(cmp, exp.Between):
        return new >= old if operand_key == "low" else operand_key == "high" and new <= old
    lower = isinstance(cmp, exp.GT | exp.GTE)  # column > constant: a larger constant is stricter
    upper = isinstance(cmp, exp.LT | exp.LTE)
    if operand_key == "this":  # constant on the left: ``c < x`` is ``x > c``
        lower, upper = upper, lower
    if lower:
        return bool(new >= old)
    if upper:
        return bool(new <= old)
    return False


def reuse_refusal(q1: str, q2: str, q1_safety: str | None) -> str | None:
    """Why the sketch of ``q1`` cannot skip data for ``q2`` (None: it can)."""
    try:
        t1: Any = sqlglot.parse_one(q1)
        t2: Any = sqlglot.parse_one(q2)
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"cannot parse the query: {str(exc).splitlines()[0]}") from None
    if _template(t1) != _template(t2):
        return "not an instance of the sketched query's template (only constants may differ)"
    limited = t1.find(exp.Limit) is not None
    for a, b in zip(t1.find_all(exp.Literal), t2.find_all(exp.Literal), strict=True):
        old, new = _value(a), _value(b)
        if old == new and a.is_string == b.is_string:
            continue
        kind, cmp = _clause(a)
        key = str((a.parent.arg_key if isinstance(a.parent, exp.Cast) else a.arg_key) or "")
        if kind == "limit":
            if not new <= old:
                return f"LIMIT {b.sql()} is larger than the sketched LIMIT {a.sql()}"
            continue
        if kind in ("where", "having") and limited:
            return (
                f"constant {a.sql()} -> {b.sql()} filters the groups a LIMIT ranks: rows beyond the "
                "sketched top-k could move up"
            )
        if kind == "where" and q1_safety != "S1":
            return f"WHERE constant {a.sql()} -> {b.sql()} changes the aggregates of a non-monotone query"
        if kind not in ("where", "having") or cmp is None or not _implies(cmp, key, old, new):
            return f"constant {a.sql()} -> {b.sql()} does not narrow a {kind.upper()} conjunct"
    return None


def pick(candidates: Sequence[tuple[str, int]], q2: str, safety: Sequence[str | None]) -> int | None:
    """Of sketches ``(query, fragment bits)``, the index of a reusable one with the fewest fragments."""
    best: tuple[int, int] | None = None
    for i, ((q1, bits), s) in enumerate(zip(candidates, safety, strict=True)):
        if reuse_refusal(q1, q2, s) is None:
            size = bin(bits).count("1")
            if best is None or size < best[0]:
                best = (size, i)
    return None if best is None else best[1]
