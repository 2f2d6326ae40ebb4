"""Payload variants over the fivm view tree: SQL-OPT degree payloads and conjunctive-query payloads.

docs/algorithms/fivm-baselines.md §6.

* ``sql-opt``: the fivm view tree and triggers with the degree-indexed ring (one entry per
  aggregate monomial) in place of cofactor blocks; results in the covariance form.
* ``list-keys``: a conjunctive query (``ring: listing``) as a group-by over its output variables with
  integer payloads (every output variable stays in the keys); the result is read as a listing.
* ``list-payloads``: the listing ring itself (the fivm maintainer).
* ``fact-payloads``: factorized payloads, every view stored; the result is the listing enumerated
  from the views top-down.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from services.fivm.baselines.common import (
    ResultRing,
    fivm_tree,
    int_view,
    query_ring,
    require,
    transient_view,
)
from services.fivm.maintain import FivmMaintainer, Support
from services.fivm.order import VariableOrder
from services.fivm.query import Query
from services.fivm.rings import make_ring
from services.fivm.rings.factorized import count, values
from services.fivm.rings.listing import Listing, ListingRing
from services.fivm.views import Key, View
from services.fivm.viewtree import INDICATOR, LEAF, ViewNode


class SqlOptMaintainer(FivmMaintainer):
    """Strategy ``sql-opt``: F-IVM with the degree ring (§6.1)."""

    def __init__(self, query: Query) -> None:
        require(query, ("covariance",), debug=True)
        super().__init__(query)
        # Same tree, same lifted numbering; only the payload ring differs. No view holds data yet.
        exact = {} if query.decimals is None else {"decimals": query.decimals}
        self.ring = make_ring("degree", self.tree.lifted, **exact)
        self._one = self.ring.one()
        self.views.clear()
        self._materialize()


class ListPayloadsMaintainer(FivmMaintainer):
    """Strategy ``list-payloads``: F-IVM with listing payloads (§6.2)."""

    def __init__(self, query: Query) -> None:
        require(query, ("listing",), debug=True)
        super().__init__(query)


class RingSwap:
    """A fivm maintainer over the same query in another ring; the engine reads results in the listing
    ring through ``roots``. Extra views (``extra``) are part of the state beside the tree's views."""

    def __init__(self, query: Query, inner_ring: str) -> None:
        require(query, ("listing",))
        _, listing_tree = fivm_tree(query)
        listing = query_ring(query, listing_tree.lifted, any_order=False)
        assert isinstance(listing, ListingRing)
        self.listing = listing
        self.inner = FivmMaintainer(replace(query, ring=inner_ring, ring_options=()))
        self.ring = ResultRing(listing, self.inner.ring)
        self.order: VariableOrder = self.inner.order
        self.updatable = self.inner.updatable
        self.supports: dict[str, Support] = self.inner.supports
        self.dropped: dict[str, list[Key]] = self.inner.dropped
        self.extra: dict[str, View] = {}

    @property
    def loading(self) -> bool:
        return self.inner.loading

    @loading.setter
    def loading(self, value: bool) -> None:
        self.inner.loading = value

    @property
    def views(self) -> dict[str, View]:
        return {**self.inner.views, **self.extra}

    @views.setter
    def views(self, value: dict[str, View]) -> None:
        raise AttributeError("the views of a payload variant follow its view tree")

    def seal(self) -> None:
        self.inner.seal()

    def rebuild_derived(self) -> None:
        self.inner.rebuild_derived()

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        self.inner.apply_relation(base, delta)

    def listing_view(self, rows: dict[tuple[Any, ...], int]) -> View:
        """The result as one listing payload over every output variable, columns in preorder."""
        schema = tuple(range(len(self.listing.variables)))
        nonzero = {t: m for t, m in rows.items() if m}
        data = {(): Listing(schema, nonzero)} if nonzero else {}
        return transient_view("Q", (), self.ring, data)


class ListKeysMaintainer(RingSwap):
    """Strategy ``list-keys`` (§6.2): the output variables are group-by keys, payloads are counts."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, "count")

    def roots(self) -> list[View]:
        variables = self.listing.variables
        roots = self.inner.roots()
        rows: dict[tuple[Any, ...], int] = {}
        for combo in itertools.product(*(list(v.items()) for v in roots)):
            named: dict[str, Any] = {}
            m = 1
            for view, (key, p) in zip(roots, combo, strict=True):
                named.update(zip(view.keys, key, strict=True))
                m *= p
            t = tuple(named[v] for v in variables)
            rows[t] = rows.get(t, 0) + m
        return [self.listing_view(rows)]


class FactPayloadsMaintainer(RingSwap):
    """Strategy ``fact-payloads`` (§6.3): factorized payloads, the listing enumerated from the views.

    A leaf that composes two or more output variables keeps, besides its view, the view ``L@leaf``
    over its keys and those variables (the factorized payload keeps the first of them only)."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, "factorized")
        self.tree = self.inner.tree
        self.wide: dict[str, tuple[str, tuple[int, ...]]] = {}  # leaf -> (view name, tuple positions)
        occ = {o.name: o for o in query.occurrences}
        for node in self.tree.nodes():
            if node.kind == LEAF and len(node.composed_lifted) > 1 and node.relation is not None:
                cols = occ[node.relation].columns
                keys = node.keys + node.composed_lifted
                name = f"L@{node.name}"
                self.extra[name] = int_view(name, keys)
                self.wide[node.name] = (name, tuple(cols.index(v) for v in keys))
        self.rebuild_derived()

    def rebuild_derived(self) -> None:
        self.inner.rebuild_derived()
        for node in self.tree.nodes():
            if node.name in self.wide:
                self.extra[self.wide[node.name][0]].add_index(tuple(range(len(node.keys))))

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        self.inner.apply_relation(base, delta)
        for o in self.inner.query.occurrences_of(base):
            wide = self.wide.get(o.name)
            if wide is not None:
                view = self.extra[wide[0]]
                for t, m in delta.items():
                    view.add(tuple([t[i] for i in wide[1]]), m)

    def roots(self) -> list[View]:
        variables = self.listing.variables
        rows: dict[tuple[Any, ...], int] = {}
        for combo in itertools.product(*(list(self._enumerate(r, {})) for r in self.tree.roots)):
            named: dict[str, Any] = {}
            m = 1
            for part, k in combo:
                named.update(part)
                m *= k
            if m:
                t = tuple(named[v] for v in variables)
                rows[t] = rows.get(t, 0) + m
        return [self.listing_view(rows)]

    def _enumerate(self, node: ViewNode, bound: dict[str, Any]) -> Iterator[tuple[dict[str, Any], int]]:
        """(values of the output variables below ``node``, multiplicity) given the ancestors' values:
        iterate an output variable's values in its view, multiply the payloads of the views right
        above relations (docs/algorithms/fivm-rings.md §5.3)."""
        view = self.inner.views[node.name]
        key = tuple([bound[v] for v in node.keys])
        wide = self.wide.get(node.name)
        if wide is not None:
            aux = self.extra[wide[0]]
            n = len(node.keys)
            for k in aux.lookup(tuple(range(n)), key):
                yield dict(zip(node.composed_lifted, k[n:], strict=True)), aux.data[k]
            return
        p = view.get(key)
        if p is None:
            return
        if node.kind == LEAF and node.composed_lifted:
            (var,) = node.composed_lifted
            for x, m in values(p):
                yield {var: x}, m
        elif node.kind in (LEAF, INDICATOR) or not node.lift or node.var is None:
            # A relation, or a bound variable: no output variable below (they sit above bound ones).
            yield {}, count(p)
        else:
            for x, _ in values(p):
                here = {**bound, node.var: x}
                parts = [list(self._enumerate(c, here)) for c in node.children]
                for combo in itertools.product(*parts):
                    out = {node.var: x}
                    m = 1
                    for part, mult in combo:
                        out.update(part)
                        m *= mult
                    yield out, m


def sql_opt(query: Query) -> SqlOptMaintainer:
    return SqlOptMaintainer(query)


def list_keys(query: Query) -> ListKeysMaintainer:
    return ListKeysMaintainer(query)


def list_payloads(query: Query) -> ListPayloadsMaintainer:
    return ListPayloadsMaintainer(query)


def fact_payloads(query: Query) -> FactPayloadsMaintainer:
    return FactPayloadsMaintainer(query)
