"""Payload variants over the fivm view tree: SQL-OPT degree payloads and conjunctive-query payloads.

docs/fivm/baselines.md §6.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ivmstream.services.fivm.baselines.common import (
    ResultRing,
    fivm_tree,
    int_view,
    query_ring,
    require,
    transient_view,
)
from ivmstream.services.fivm.maintain import FivmMaintainer, Support
from ivmstream.services.fivm.order import VariableOrder
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.rings import make_ring
from ivmstream.services.fivm.rings.factorized import count, values
from ivmstream.services.fivm.rings.listing import Listing, ListingRing
from ivmstream.services.fivm.views import Key, View
from ivmstream.services.fivm.viewtree import INDICATOR, LEAF, ViewNode


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


@dataclass(frozen=True)
class WideLeaf:
    """``L@leaf``: a leaf's relation projected on its keys and its output variables, columns in the
    relation's order (a delta's tuples are then its keys as they are when that covers every column)."""

    view: str
    positions: tuple[int, ...]  # base tuple positions of the view's key columns
    whole: bool  # the positions are every column in order: the base tuple is the key
    key_at: tuple[int, ...]  # view key positions of the leaf's keys (the index enumeration uses)
    key_vars: tuple[str, ...]  # the leaf's keys in that order
    out_at: tuple[int, ...]  # view key positions of the output variables
    out_vars: tuple[str, ...]


class FactPayloadsMaintainer(RingSwap):
    """Strategy ``fact-payloads`` (§6.3): factorized payloads, the listing enumerated from the views.

    A leaf that composes two or more output variables keeps, besides its view, the view ``L@leaf``
    over its keys and those variables (the factorized payload keeps the first of them only).
    Enumeration takes an output variable's candidate values from a relation below it, never from the
    variable's own payload, whose multiplicities may cancel under negative multiplicities (§6.3)."""

    def __init__(self, query: Query) -> None:
        super().__init__(query, "factorized")
        self.tree = self.inner.tree
        self.wide: dict[str, WideLeaf] = {}
        occ = {o.name: o for o in query.occurrences}
        for node in self.tree.nodes():
            if node.kind == LEAF and len(node.composed_lifted) > 1 and node.relation is not None:
                cols = occ[node.relation].columns
                keys = tuple(sorted(node.keys + node.composed_lifted, key=cols.index))
                name = f"L@{node.name}"
                self.extra[name] = int_view(name, keys)
                positions = tuple(cols.index(v) for v in keys)
                key_at = tuple(i for i, v in enumerate(keys) if v in node.keys)
                out_at = tuple(i for i, v in enumerate(keys) if v not in node.keys)
                self.wide[node.name] = WideLeaf(
                    name,
                    positions,
                    positions == tuple(range(len(cols))),
                    key_at,
                    tuple(keys[i] for i in key_at),
                    out_at,
                    tuple(keys[i] for i in out_at),
                )
        # A wide leaf's factor is never enumerated (L@leaf is) and its parent keeps only its count
        # (§5.2): its view stores the count, built without a value map per key.
        inner = self.inner
        for base, plans in inner.plans.items():
            inner.plans[base] = [
                replace(p, lifted=()) if p.kind == LEAF and p.leaf in self.wide else p for p in plans
            ]
        # Per output variable with children: the leaf below whose keys give its candidate values, and
        # the positions of the leaf's keys bound above the variable (an index unless there are none).
        self.source: dict[str, tuple[ViewNode, tuple[int, ...], int]] = {}
        for node in self.tree.nodes():
            if node.kind == LEAF or not node.lift or node.var is None:
                continue
            above = set(node.keys)
            leaves = [n for n in node.walk() if n.kind == LEAF and node.var in n.keys]
            leaf = min(leaves, key=lambda n: len(set(n.keys) - above))
            keys = self._candidate_keys(leaf)
            bound = tuple(i for i, v in enumerate(keys) if v in above)
            self.source[node.name] = (leaf, bound, keys.index(node.var))
        self._groups: dict[tuple[str, tuple[int, ...]], dict[Key, list[Key]]] = {}
        self.rebuild_derived()

    def _candidate_keys(self, leaf: ViewNode) -> tuple[str, ...]:
        wide = self.wide.get(leaf.name)
        return self.extra[wide.view].keys if wide is not None else leaf.keys

    def _candidate_view(self, leaf: ViewNode) -> View:
        wide = self.wide.get(leaf.name)
        return self.extra[wide.view] if wide is not None else self.inner.views[leaf.name]

    def rebuild_derived(self) -> None:
        self.inner.rebuild_derived()

    def _lookup(self, view: View, positions: tuple[int, ...], values: Key) -> Iterable[Key]:
        """The keys of ``view`` with ``values`` at ``positions``. The groups are built when a result
        is read, not kept as indexes: updates then cost no index upkeep, and a read enumerates the
        whole listing anyway."""
        groups = self._groups.get((view.name, positions))
        if groups is None:
            groups = self._groups[view.name, positions] = {}
            for k in view.data:
                bucket = tuple([k[i] for i in positions])
                found = groups.get(bucket)
                if found is None:
                    groups[bucket] = [k]
                else:
                    found.append(k)
        return groups.get(values, ())

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        self.inner.apply_relation(base, delta)
        for o in self.inner.query.occurrences_of(base):
            wide = self.wide.get(o.name)
            if wide is None:
                continue
            view = self.extra[wide.view]
            if wide.whole:
                view.add_count_map(delta)  # the view's key is the base tuple itself
            else:
                pos = wide.positions
                view.add_counts((tuple([t[i] for i in pos]), m) for t, m in delta.items())

    def roots(self) -> list[View]:
        variables = self.listing.variables
        rows: dict[tuple[Any, ...], int] = {}
        self._groups = {}
        parts = [list(self._enumerate(r, {})) for r in self.tree.roots]
        self._groups = {}
        for combo in itertools.product(*parts):
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
        iterate an output variable's candidate values, recurse into its children, multiply the
        payloads of the views right above relations (docs/fivm/rings.md §5.3)."""
        wide = self.wide.get(node.name)
        if wide is not None:
            aux = self.extra[wide.view]
            out_at, out_vars = wide.out_at, wide.out_vars
            for k in self._lookup(aux, wide.key_at, tuple([bound[v] for v in wide.key_vars])):
                yield dict(zip(out_vars, [k[i] for i in out_at], strict=True)), aux.data[k]
            return
        if node.kind == LEAF or node.kind == INDICATOR or not node.lift or node.var is None:
            p = self.inner.views[node.name].get(tuple([bound[v] for v in node.keys]))
            if p is None:
                return
            if node.kind == LEAF and node.composed_lifted:
                (var,) = node.composed_lifted
                for x, m in values(p):
                    yield {var: x}, m
            else:
                # A relation, or a bound variable: no output variable below (they sit above bound ones).
                yield {}, count(p)
            return
        for x in self._candidates(node, bound):
            here = {**bound, node.var: x}
            parts = [list(self._enumerate(c, here)) for c in node.children]
            for combo in itertools.product(*parts):
                out = {node.var: x}
                m = 1
                for part, mult in combo:
                    out.update(part)
                    m *= mult
                yield out, m

    def _candidates(self, node: ViewNode, bound: dict[str, Any]) -> list[Any]:
        """The values of ``node``'s variable some relation below it holds under the bound values: a
        superset of those with join rows below, whatever the signs of their multiplicities."""
        leaf, positions, at = self.source[node.name]
        view = self._candidate_view(leaf)
        if positions:
            keys = view.keys
            found = self._lookup(view, positions, tuple([bound[keys[i]] for i in positions]))
        else:
            found = view.data
        return list(dict.fromkeys([k[at] for k in found]))


def sql_opt(query: Query) -> SqlOptMaintainer:
    return SqlOptMaintainer(query)


def list_keys(query: Query) -> ListKeysMaintainer:
    return ListKeysMaintainer(query)


def list_payloads(query: Query) -> ListPayloadsMaintainer:
    return ListPayloadsMaintainer(query)


def fact_payloads(query: Query) -> FactPayloadsMaintainer:
    return FactPayloadsMaintainer(query)
