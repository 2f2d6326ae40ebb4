"""Aggregates over a join as sums of products of per-relation factors (the form F-IVM maintains).

``SUM(e)`` over a join is rewritten as Σ coef · SUM(f_1 · ... · f_k) where each factor f_i is an
expression over one relation occurrence: products distribute, sums split, and a ``CASE`` whose
condition reads one relation becomes an indicator factor of that relation. Each distinct product
of factors (a *monomial*) is one aggregate the service maintains; the view's outputs are evaluated
from the monomials' values per group.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ivmstream.sql.analyze import AGGREGATES, Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import NUMERIC, _add, _div, _mul, _sub, by_column, number_literal, position_of

Coef = int | Decimal
Term = tuple[Coef, dict[str, exp.Expression]]  # coefficient, factor expression per alias


class NotFactorizable(Exception):
    """An aggregate argument that mixes relations in a way no product of factors expresses."""

    def __init__(self, node: exp.Expression) -> None:
        self.node = node
        super().__init__(node.sql())


def _one() -> exp.Expression:
    return exp.Literal.number(1)


def _all(conds: list[exp.Expression]) -> exp.Expression:
    out = conds[0].copy()
    for c in conds[1:]:
        out = exp.And(this=out, expression=c.copy())
    return out


def _indicator(cond: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=cond.copy(), true=_one())], default=exp.Literal.number(0))


def _times(a: list[Term], b: list[Term]) -> list[Term]:
    out: list[Term] = []
    for ca, fa in a:
        for cb, fb in b:
            merged = dict(fa)
            for alias, f in fb.items():
                merged[alias] = (
                    exp.Mul(this=exp.Paren(this=merged[alias].copy()), expression=exp.Paren(this=f.copy()))
                    if alias in merged
                    else f
                )
            out.append((ca * cb, merged))
    return out


def _neg(terms: list[Term]) -> list[Term]:
    return [(-c, f) for c, f in terms]


def decompose(shape: Shape, node: exp.Expression) -> list[Term]:
    """``node`` as Σ coef · Π factor; NotFactorizable if it cannot be."""
    used = shape.aliases_in(node)
    if not used:
        value = _constant(node)
        return [(value, {})] if value != 0 else []
    if len(used) == 1:
        return [(1, {next(iter(used)): node})]
    if isinstance(node, exp.Paren):
        return decompose(shape, node.this)
    if isinstance(node, exp.Add):
        return decompose(shape, node.this) + decompose(shape, node.expression)
    if isinstance(node, exp.Sub):
        return decompose(shape, node.this) + _neg(decompose(shape, node.expression))
    if isinstance(node, exp.Neg):
        return _neg(decompose(shape, node.this))
    if isinstance(node, exp.Mul):
        return _times(decompose(shape, node.this), decompose(shape, node.expression))
    if isinstance(node, exp.Case):
        ifs = node.args.get("ifs") or []
        default = node.args.get("default") or exp.Literal.number(0)
        if not ifs:
            return decompose(shape, default)
        cond, then = ifs[0].this, ifs[0].args["true"]
        rest = exp.Case(ifs=[i.copy() for i in ifs[1:]], default=default.copy()) if len(ifs) > 1 else default
        if len(shape.aliases_in(cond)) != 1:
            raise NotFactorizable(cond)
        alias = next(iter(shape.aliases_in(cond)))
        ind: list[Term] = [(1, {alias: _indicator(cond)})]
        other = decompose(shape, rest)
        return _times(ind, decompose(shape, then)) + other + _neg(_times(ind, other))
    raise NotFactorizable(node)


def _constant(node: exp.Expression) -> Coef:
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return number_literal(str(node.this))
    if isinstance(node, exp.Neg):
        return -_constant(node.this)
    ops: dict[type, Callable[[Any, Any], Any]] = {exp.Add: _add, exp.Sub: _sub, exp.Mul: _mul}
    op = ops.get(type(node))
    if op is not None:
        return op(_constant(node.this), _constant(node.expression))  # type: ignore[no-any-return]
    if isinstance(node, exp.Div):
        q = _div(_constant(node.this), _constant(node.expression))
        if q is None:
            raise NotFactorizable(node)
        return q  # type: ignore[no-any-return]
    raise NotFactorizable(node)


@dataclass
class AggregateSpec:
    """One aggregate call of an output: its kind and its terms (``COUNT``: one term, no factors)."""

    node: Any  # the aggregate call (its id keys its value)
    kind: str  # sum | count | avg
    terms: list[Term]


MAX_DISJUNCTS = 4


def disjunction_terms(shape: Shape) -> list[Term] | None:
    """The view's cross-relation predicates as one indicator, a sum of products of per-relation
    indicators, when each is an OR of conjunctions of single-relation conditions (inclusion-exclusion:
    [D1 or ... or Dn] = sum over non-empty S of (-1)^(|S|+1) prod over aliases of [the conjunction of
    S's conditions on it]); None when some predicate is not of that form."""
    from ivmstream.sql.analyze import conjuncts, disjuncts

    total: list[Term] = [(1, {})]
    for node in shape.residual:
        parts = disjuncts(node)
        if len(parts) < 2 or len(parts) > MAX_DISJUNCTS:
            return None
        per_alias: list[dict[str, list[exp.Expression]]] = []
        for part in parts:
            split: dict[str, list[exp.Expression]] = {}
            for c in conjuncts(part):
                used = shape.aliases_in(c)
                if len(used) != 1:
                    return None
                split.setdefault(next(iter(used)), []).append(c)
            per_alias.append(split)
        terms: list[Term] = []
        for size in range(1, len(parts) + 1):
            for subset in itertools.combinations(per_alias, size):
                conds: dict[str, list[exp.Expression]] = {}
                for split in subset:
                    for alias, cs in split.items():
                        conds.setdefault(alias, []).extend(cs)
                factors = {a: _indicator(_all(cs)) for a, cs in conds.items()}
                terms.append(((-1) ** (size + 1), factors))
        total = _times(total, terms)
    return total


def aggregate_specs(shape: Shape, indicator: list[Term] | None = None) -> list[AggregateSpec]:
    """Every aggregate call of the view's outputs, decomposed (times ``indicator``, the view's
    cross-relation predicate, where it has one); SqlError where one cannot be."""
    out: list[AggregateSpec] = []
    for _name, node in shape.items:
        for agg in node.find_all(*AGGREGATES):
            arg = agg.this
            if isinstance(agg, exp.Count):
                if isinstance(arg, exp.Distinct):
                    raise SqlError("unsupported: COUNT(DISTINCT ...)", position_of(shape.view.statement, agg))
                out.append(AggregateSpec(agg, "count", indicator or [(1, {})]))
                continue
            kind = shape.compiler(by_column).type_of(arg)
            if kind not in NUMERIC:
                raise SqlError(
                    f"type mismatch: {agg.key.upper()} of {arg.sql()!r}, which is {kind}, not a number",
                    position_of(shape.view.statement, arg),
                )
            try:
                terms = decompose(shape, arg)
            except NotFactorizable as exc:
                raise NotFactorizable(exc.node) from None
            if indicator is not None:
                terms = _times(terms, indicator)
            out.append(AggregateSpec(agg, "avg" if isinstance(agg, exp.Avg) else "sum", terms))
    return out


def evaluate_output(node: exp.Expression, aggs: Mapping[int, Any], columns: Mapping[int, Any]) -> Any:
    """An output expression over aggregate values (by node id) and grouped column values."""
    if id(node) in aggs:
        return aggs[id(node)]
    if id(node) in columns:
        return columns[id(node)]
    if isinstance(node, exp.Paren):
        return evaluate_output(node.this, aggs, columns)
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(number_literal(str(node.this)))
    if isinstance(node, exp.Neg):
        v = evaluate_output(node.this, aggs, columns)
        return None if v is None else -v
    a = evaluate_output(node.this, aggs, columns)
    b = evaluate_output(node.expression, aggs, columns)
    if a is None or b is None:
        return None
    if isinstance(node, exp.Div):
        # DBToaster's quotient: the numerator times the inverse of the denominator, so 0 over 0 is 0
        # (an empty SUM over an empty SUM); another number over 0 is null (DBToaster's is infinite).
        if b == 0:
            return 0.0 if a == 0 else None
        return float(a) / float(b)
    ops: dict[type, Callable[[Any, Any], Any]] = {exp.Add: _add, exp.Sub: _sub, exp.Mul: _mul}
    return ops[type(node)](a, b)
