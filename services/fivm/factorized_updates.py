"""Factorized updates: a delta given as a product of factors, propagated without expanding it.

docs/fivm/algorithm.md §2.13. ``δR = F1 ⊗ … ⊗ Fr`` where the factors' column sets are disjoint and
cover R's columns (all but a weight column, whose value the factor payloads are): a rank-1 change
``u[J] ⊗ v[K]`` of a matrix A2[J,K], a one-row change ``e_i ⊗ v``; rank r is r such products in turn.

At each view V@X on R's path the factors and siblings mentioning X are joined and X is summed out
(variable elimination); factors not mentioning X pass through unchanged, and terms that came to share
a variable are joined so the factors stay disjoint. Only a materialized view on the path expands the
product, to absorb it. Strategies without this path receive ``expand(...)``: the same delta as
tuples (correct, and as slow as the expansion).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ivmstream.services.fivm.maintain import FivmMaintainer
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.views import Key, View
from ivmstream.services.fivm.viewtree import INDICATOR, ViewNode

# Rings whose payloads are scalars: products commute and a factor value maps to one element.
SCALAR_RINGS = ("count", "sum", "matrix")


@dataclass(frozen=True)
class Factor:
    """One factor: a relation over ``columns`` (names of the updated relation) with number payloads."""

    columns: tuple[str, ...]
    entries: Mapping[Key, int | float]


@dataclass(frozen=True)
class FactorizedDelta:
    """A validated product delta of base relation ``relation`` (intake: ivmstream.services.fivm.intake)."""

    relation: str
    factors: tuple[Factor, ...]
    copies: int = 1  # the delta is this many times the product (an event's ``delta``)


@dataclass
class Term:
    """A factor during propagation: its variables and entries; ``view`` when it is a stored sibling."""

    vars: tuple[str, ...]
    data: Mapping[Key, Any]
    view: View | None = None


# --- the expanded form (every strategy) ------------------------------------------------------------------


def expand(query: Query, delta: FactorizedDelta) -> dict[Key, int]:
    """The delta as tuple -> multiplicity in R's column order: ``copies · Π values`` of each tuple, or,
    for a weighted relation, ``copies`` of the tuple whose weight column holds ``Π values`` (exact for
    ints and, with ``decimals``, for the decimals the values spell)."""
    rel = next(r for r in query.relations if r.name == delta.relation)
    weight = query.weight_of(rel.name)
    exact = query.decimals is not None
    pos = {c: i for i, c in enumerate(rel.columns)}
    out: dict[Key, int] = {}
    for combo in itertools.product(*(f.entries.items() for f in delta.factors)):
        row: list[Any] = [None] * len(rel.columns)
        value: Any = 1 if weight is not None else delta.copies
        for f, (key, v) in zip(delta.factors, combo, strict=True):
            for c, x in zip(f.columns, key, strict=True):
                row[pos[c]] = x
            value = value * (Decimal(repr(v)) if exact and v.__class__ is float else v)
        if weight is None:
            out[tuple(row)] = out.get(tuple(row), 0) + int(value)
            continue
        if rel.types[pos[weight]] == "float":
            value = float(value) + 0.0
        row[pos[weight]] = value
        t = tuple(row)
        out[t] = out.get(t, 0) + delta.copies
    return {t: m for t, m in out.items() if m}


# --- the factorized path (strategies fivm, fivm-one) -------------------------------------------------------


def supports_factorized(maint: Any, relation: str) -> bool:
    """Whether ``maint`` can take this relation's product delta factorized: the view-tree maintainer
    over a scalar ring, without a support to keep (indicator projections and debug mode need tuples)."""
    return (
        type(maint) is FivmMaintainer
        and maint.ring.name in SCALAR_RINGS
        and relation not in maint.supports
        and all(p.kind != INDICATOR for p in maint.plans[relation])
    )


def apply_factorized(maint: FivmMaintainer, delta: FactorizedDelta) -> dict[str, int]:
    """Propagate the product through every leaf of its relation (aliases in turn, §2.6); returns the
    entries each materialized view absorbed (the expansion sizes)."""
    query = maint.query
    base = next(r for r in query.relations if r.name == delta.relation)
    absorbed: dict[str, int] = {}
    elements = _elements(maint, delta)
    for plan in maint.plans[delta.relation]:
        occ = next(o for o in query.occurrences if o.name == plan.occurrence)
        rename = dict(zip(base.columns, occ.columns, strict=True))
        terms = [
            Term(tuple(rename[c] for c in f.columns), e) for f, e in zip(delta.factors, elements, strict=True)
        ]
        _propagate(maint, maint.nodes[plan.leaf], terms, absorbed)
    return absorbed


def _places(value: int | float) -> int:
    """Decimal places ``value`` spells (its shortest repr): 0.25 -> 2, 3.0 -> 0."""
    if value.__class__ is int:
        return 0
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent
    return max(0, -int(exponent))


def product_places(delta: FactorizedDelta) -> int:
    """Decimal places the exact product of the factors can need: Σ over factors of the most any value
    spells. The intake refuses a product needing more than ``decimals``."""
    return sum(max((_places(v) for v in f.entries.values()), default=0) for f in delta.factors)


def _elements(maint: FivmMaintainer, delta: FactorizedDelta) -> list[dict[Key, Any]]:
    """Factor values as ring elements whose product is the tuple payload ``m · weight``: a scaled one
    for multiplicities; for weights the lift of the weight column, except in exact decimals, where
    factor k counts units of 10^-p_k and the first factor also carries 10^(N - Σ p_k), so that the
    product counts units of 10^-N like the weight's lift."""
    ring = maint.ring
    weight = maint.query.weight_of(delta.relation)
    one = ring.one()
    decimals = getattr(ring, "decimals", None)
    if weight is None:
        out = [{k: ring.scale(int(v), one) for k, v in f.entries.items()} for f in delta.factors]
    elif decimals is None:
        out = [{k: ring.lift(weight, v) for k, v in f.entries.items()} for f in delta.factors]
    else:
        places = [max((_places(v) for v in f.entries.values()), default=0) for f in delta.factors]
        out = [
            {k: _units(v, p) for k, v in f.entries.items()}
            for f, p in zip(delta.factors, places, strict=True)
        ]
        out[0] = {k: x * 10 ** (decimals - sum(places)) for k, x in out[0].items()}
    if delta.copies != 1:
        out[0] = {k: ring.scale(delta.copies, x) for k, x in out[0].items()}
    return out


def _units(value: int | float, places: int) -> int:
    """``value · 10^places`` exactly (``value`` spells at most ``places`` decimals)."""
    return int(Decimal(repr(value) if value.__class__ is float else value).scaleb(places))


def _propagate(maint: FivmMaintainer, leaf: ViewNode, terms: list[Term], absorbed: dict[str, int]) -> None:
    ring = maint.ring
    # The leaf: sum out the composed variables inside the factor holding each (with their lifts).
    keys = set(leaf.keys)
    lifted = set(leaf.composed_lifted)
    out: list[Term] = []
    for t in terms:
        if set(t.vars) <= keys:
            out.append(t)
            continue
        keep = tuple(i for i, v in enumerate(t.vars) if v in keys)
        lifts = tuple((i, v) for i, v in enumerate(t.vars) if v in lifted)
        data: dict[Key, Any] = {}
        for k, p in t.data.items():
            for i, v in lifts:
                p = ring.mul(p, ring.lift(v, k[i]))
            kk = tuple([k[i] for i in keep])
            data[kk] = ring.add(data[kk], p) if kk in data else p
        out.append(Term(tuple(t.vars[i] for i in keep), _nonzero(ring, data)))
    terms = _disjoint(ring, out)
    node = leaf
    while True:
        if any(not t.data for t in terms):
            return  # an empty factor: the product is empty, nothing changes from here up
        view = maint.views.get(node.name)
        if view is not None:
            absorbed[node.name] = absorbed.get(node.name, 0) + _absorb(ring, view, terms)
        parent = node.parent
        if parent is None:
            return
        siblings = [c for c in parent.children if c is not node]
        items = terms + [Term(c.keys, maint.views[c.name].data, maint.views[c.name]) for c in siblings]
        x = parent.var
        if parent.marginalize and x is not None and any(x in t.vars for t in items):
            group = [t for t in items if x in t.vars]
            rest = [t for t in items if x not in t.vars]
            joined = _join(ring, group)
            terms = _disjoint(ring, [*rest, _sum_out(maint, joined, x, parent.lift)])
        else:
            terms = _disjoint(ring, items)
        node = parent


def _nonzero(ring: Any, data: dict[Key, Any]) -> dict[Key, Any]:
    return {k: p for k, p in data.items() if not ring.is_zero(p)}


def _disjoint(ring: Any, terms: list[Term]) -> list[Term]:
    """Join terms that share a variable until no two do (the factors of a product must be disjoint)."""
    terms = list(terms)
    merged = True
    while merged:
        merged = False
        for a, b in itertools.combinations(range(len(terms)), 2):
            if set(terms[a].vars) & set(terms[b].vars):
                joined = _join(ring, [terms[a], terms[b]])
                terms = [t for i, t in enumerate(terms) if i not in (a, b)] + [joined]
                merged = True
                break
    return terms


def _join(ring: Any, terms: Sequence[Term]) -> Term:
    """The natural join of ``terms`` (payloads multiplied), from the smallest non-view term outward;
    stored siblings are probed by key or by an index they keep when one fits, else hashed once."""
    todo = sorted(terms, key=lambda t: (t.view is not None, len(t.data)))
    first = todo.pop(0)
    row_vars = list(first.vars)
    rows: list[tuple[Key, Any]] = list(first.data.items())
    while todo:
        bound = set(row_vars)
        nxt = max(todo, key=lambda t: (set(t.vars) <= bound, len(set(t.vars) & bound), -len(t.data)))
        todo.remove(nxt)
        pos = {v: i for i, v in enumerate(row_vars)}
        shared = tuple(i for i, v in enumerate(nxt.vars) if v in bound)
        extend = tuple(i for i, v in enumerate(nxt.vars) if v not in bound)
        probe = tuple(pos[nxt.vars[i]] for i in shared)
        out: list[tuple[Key, Any]] = []
        if not extend:
            get = nxt.data.get
            for row, p in rows:
                q = get(tuple([row[i] for i in probe]))
                if q is not None:
                    out.append((row, ring.mul(p, q)))
        else:
            index = _index(nxt, shared)
            entries = nxt.data
            for row, p in rows:
                for k in index(tuple([row[i] for i in probe])):
                    out.append((row + tuple([k[i] for i in extend]), ring.mul(p, entries[k])))
        rows = out
        row_vars.extend(nxt.vars[i] for i in extend)
        if not rows:
            break
    data: dict[Key, Any] = {}
    for row, p in rows:
        data[row] = ring.add(data[row], p) if row in data else p
    return Term(tuple(row_vars), data)


def _index(term: Term, shared: tuple[int, ...]) -> Any:
    """Bound values -> the term's keys matching them: the view's own index when it keeps one on
    ``shared``, else a hash built now (one pass)."""
    if term.view is not None and shared in term.view.indexes:
        view = term.view
        return lambda b: view.lookup(shared, b)
    buckets: dict[Key, list[Key]] = {}
    for k in term.data:
        buckets.setdefault(tuple([k[i] for i in shared]), []).append(k)
    return lambda b: buckets.get(b, ())


def _sum_out(maint: FivmMaintainer, term: Term, x: str, lift: bool) -> Term:
    """⊕_X g_X ⊗ term: X leaves the keys, each payload multiplied by X's lift when X is lifted."""
    ring = maint.ring
    at = term.vars.index(x)
    keep = tuple(i for i in range(len(term.vars)) if i != at)
    data: dict[Key, Any] = {}
    for k, p in term.data.items():
        if lift:
            p = ring.mul(ring.lift(x, k[at]), p)
        kk = tuple([k[i] for i in keep])
        data[kk] = ring.add(data[kk], p) if kk in data else p
    return Term(tuple(term.vars[i] for i in keep), _nonzero(ring, data))


def _absorb(ring: Any, view: View, terms: list[Term]) -> int:
    """view ⊎= ⊗ terms, expanded over the view's keys; returns the number of entries added."""
    where = {v: (ti, i) for ti, t in enumerate(terms) for i, v in enumerate(t.vars)}
    spec = [where[v] for v in view.keys]
    mul, is_zero, add = ring.mul, ring.is_zero, view.add
    n = 0
    for combo in itertools.product(*(t.data.items() for t in terms)):
        p = combo[0][1]
        for _, q in combo[1:]:
            p = mul(p, q)
        if is_zero(p):
            continue
        add(tuple([combo[ti][0][i] for ti, i in spec]), p)
        n += 1
    return n
