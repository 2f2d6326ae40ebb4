"""Bags of a decomposition, materialised by delta joins (docs/reservoir/algorithm.md §4).

A cyclic join is run as an acyclic join over the bags of a declared decomposition. Each bag keeps the
join of its aliases; inserting an alias tuple yields the bag tuples it creates (its join with the
other aliases of the bag, by hash lookups in a fixed order, each alias joined after one it shares a
column with), each of which the engine then inserts
into the index as a tuple of that node; a delete takes out the bag tuples it was part of, found by the
same lookups. A bag of one alias passes its tuples through unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.services.reservoir.query import Node

Tup = tuple[Any, ...]


class BagLayer:
    def __init__(self, nodes: Sequence[Node], relations: Mapping[str, tuple[str, ...]]) -> None:
        self.relations = relations
        self.node_of = {a: i for i, n in enumerate(nodes) for a in n.members}
        self.attrs = [n.attrs for n in nodes]
        # per source alias of a multi-alias bag: the other aliases in order, each with its lookup key
        self.plans: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        self.indexes: dict[str, dict[tuple[str, ...], dict[Tup, list[Tup]]]] = {}
        for n in nodes:
            if len(n.members) == 1:
                continue
            for a in n.members:
                bound = set(relations[a])
                plan = []
                rest = [b for b in n.members if b != a]
                while rest:
                    # the next alias sharing a column with those bound, so no lookup is a cross product
                    b = next((b for b in rest if bound & set(relations[b])), rest[0])
                    rest.remove(b)
                    key = tuple(c for c in relations[b] if c in bound)
                    plan.append((b, key))
                    self.indexes.setdefault(b, {}).setdefault(key, {})
                    bound |= set(relations[b])
                self.plans[a] = plan

    def insert(self, alias: str, t: Tup) -> list[Tup]:
        """The new tuples of ``alias``'s node made by the new alias tuple ``t`` (then records t)."""
        made = self._joined(alias, t)
        self.record(alias, t)
        return made

    def remove(self, alias: str, t: Tup) -> list[Tup]:
        """The tuples of ``alias``'s node that the deleted alias tuple ``t`` was part of (then forgets t)."""
        gone = self._joined(alias, t)
        cols = self.relations[alias]
        for key, index in self.indexes.get(alias, {}).items():
            v = tuple(t[cols.index(c)] for c in key)
            held = index[v]
            held.remove(t)
            if not held:
                del index[v]
        return gone

    def _joined(self, alias: str, t: Tup) -> list[Tup]:
        """The bag tuples t makes with the other aliases of its bag as they are."""
        plan = self.plans.get(alias)
        if plan is None:
            return [t]
        cols = self.relations[alias]
        bindings: list[dict[str, Any]] = [dict(zip(cols, t, strict=True))]
        for b, key in plan:
            index = self.indexes[b][key]
            b_cols = self.relations[b]
            grown = []
            for bind in bindings:
                for s in index.get(tuple(bind[c] for c in key), ()):
                    grown.append({**bind, **dict(zip(b_cols, s, strict=True))})
            bindings = grown
            if not bindings:
                break
        attrs = self.attrs[self.node_of[alias]]
        return [tuple(bind[c] for c in attrs) for bind in bindings]

    def record(self, alias: str, t: Tup) -> None:
        """Add t to the lookup indexes of its alias (no delta: restores and rebuilds)."""
        cols = self.relations[alias]
        for key, index in self.indexes.get(alias, {}).items():
            index.setdefault(tuple(t[cols.index(c)] for c in key), []).append(t)
