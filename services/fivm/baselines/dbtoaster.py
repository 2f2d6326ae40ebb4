"""A DBToaster-style recursive view hierarchy (strategies ``dbt`` and ``dbt-ring``).

docs/fivm/baselines.md §4. ``materialize(S, K, f)`` creates the view
``V(S, K, f)[K] = Σ_{vars(S) \\ K} Π_{R ∈ S} R · f`` (f: the product of the lifts of the variables it
sums out) and, for every updatable R in S, the trigger

    δV(S, K, f) = Σ_{sch(R) \\ K} δR ⊗ Π_comp V(comp, vars(comp) ∩ (sch(R) | K), f|comp)

where the components are those of S \\ {R} connected through variables outside sch(R) | K; each
component's view is materialized recursively. Views are identified by (S, K, f), so equal
subqueries are stored once. ``dbt`` has scalar payloads: the covariance ring's aggregates (the count,
each Σ x_i, each Σ x_i·x_j) are separate queries, each with its own hierarchy, sharing views through
that identity; ``dbt-ring`` builds one hierarchy with ring payloads. Self-joins are not supported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ivmstream.services.fivm.baselines.common import (
    Monomial,
    PerAggregateBaseline,
    Probe,
    group,
    index_needs,
    plan_probes,
    run_probes,
    scalar_aggregates,
    transient_view,
)
from ivmstream.services.fivm.baselines.first_order import components
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.rings import Ring, make_ring
from ivmstream.services.fivm.rings.dense_cofactor import DenseCofactorRing
from ivmstream.services.fivm.views import Key, View, sync_indexes

Powers = tuple[tuple[str, int], ...]  # a monomial over variable names, in query variable order
Ident = tuple[frozenset[str], frozenset[str], Powers | None]


@dataclass(frozen=True)
class ViewDef:
    name: str
    relations: tuple[str, ...]
    keys: tuple[str, ...]
    powers: Powers | None  # scalar payloads: the lifts this view applies; None: ring payloads


@dataclass(frozen=True)
class Trigger:
    view: str
    relation: str
    probes: tuple[Probe, ...]  # the component views, joined to δR's tuples
    out: tuple[int, ...]  # row positions of the view's keys
    lifts: tuple[tuple[str, int], ...]  # R's variables summed out here (and lifted)
    powers: Powers | None  # the view's lifts (its payload ring)


def powers_label(powers: Powers) -> str:
    return "*".join(v if k == 1 else f"{v}^{k}" for v, k in powers) or "1"


class Hierarchy:
    """The views and triggers ``materialize`` creates for the updatable relations ``updatable``."""

    def __init__(self, query: Query, updatable: frozenset[str], roots: Sequence[Powers | None]) -> None:
        self.query = query
        self.updatable = updatable
        self.occ = {o.name: o for o in query.occurrences}
        self.rank = {v: i for i, v in enumerate(query.variables)}
        self.defs: dict[Ident, ViewDef] = {}
        self.triggers: dict[str, list[Trigger]] = {r.name: [] for r in query.relations}
        all_rels = frozenset(o.name for o in query.occurrences)
        self.roots = [self.materialize(all_rels, frozenset(query.group_by), f) for f in roots]

    def variables(self, rels: frozenset[str]) -> set[str]:
        return {v for r in rels for v in self.occ[r].columns}

    def materialize(self, rels: frozenset[str], keys: frozenset[str], powers: Powers | None) -> ViewDef:
        ident = (rels, keys, powers)
        found = self.defs.get(ident)
        if found is not None:
            return found
        ordered = tuple(o.name for o in self.query.occurrences if o.name in rels)
        key_order = tuple(sorted(keys, key=self.rank.__getitem__))
        name = f"D@{'*'.join(ordered)}[{','.join(key_order)}]"
        if powers is not None:
            name += f":{powers_label(powers)}"
        view = self.defs[ident] = ViewDef(name, ordered, key_order, powers)
        for r in ordered:
            if r not in self.updatable:
                continue
            bound = set(self.occ[r].columns)
            rest = [(o, self.occ[o].columns) for o in ordered if o != r]
            sources: list[tuple[str, tuple[str, ...], bool]] = []
            for members in components(rest, bound | keys):
                comp = frozenset(members)
                ckeys = frozenset(self.variables(comp) & (bound | keys))
                sub = self.materialize(comp, ckeys, self.restrict(powers, comp, ckeys))
                sources.append((sub.name, sub.keys, False))
            probes, row = plan_probes(self.occ[r].columns, sources)
            pos = {v: i for i, v in enumerate(row)}
            lifted = [v for v in self.occ[r].columns if v not in keys]
            if powers is not None:
                lifted = [v for v in lifted if v in dict(powers)]
            self.triggers[r].append(
                Trigger(
                    view=name,
                    relation=r,
                    probes=probes,
                    out=tuple(pos[v] for v in key_order),
                    lifts=tuple((v, pos[v]) for v in lifted),
                    powers=powers,
                )
            )
        return view

    def restrict(self, powers: Powers | None, rels: frozenset[str], keys: frozenset[str]) -> Powers | None:
        """f|comp: the lifts of the variables the component's view sums out."""
        if powers is None:
            return None
        inside = self.variables(rels) - keys
        return tuple((v, k) for v, k in powers if v in inside)


class DbtMaintainer(PerAggregateBaseline):
    """Strategy ``dbt`` (``scalar``) or ``dbt-ring`` (§4)."""

    def __init__(self, query: Query, scalar: bool = True) -> None:
        super().__init__(query, scalar)
        result = self.result_ring
        self.aggregates: list[tuple[Monomial, Powers | None]] = []
        rank = {v: i for i, v in enumerate(query.variables)}
        if self.scalar:
            for mono, _ in scalar_aggregates(query, self.lifted):
                powers: dict[str, int] = {}
                for i in mono:
                    powers[self.lifted[i]] = powers.get(self.lifted[i], 0) + 1
                self.aggregates.append((mono, tuple(sorted(powers.items(), key=lambda vk: rank[vk[0]]))))
        else:
            self.aggregates.append(((), None))
        self._rings: dict[Powers | None, Ring[Any]] = {None: result}
        self.views: dict[str, View] = {}
        self.hierarchy = self._build()

    def ring_of(self, powers: Powers | None) -> Ring[Any]:
        """A scalar view's ring: the count over the integers, a product of variables over floats."""
        ring = self._rings.get(powers)
        if ring is None:
            assert powers is not None
            if not powers:
                ring = make_ring("count", ())
            else:
                ring = make_ring("sum", [v for v, _ in powers], powers=dict(powers), domain="float")
            self._rings[powers] = ring
        return ring

    def _active(self) -> frozenset[str]:
        return frozenset(r.name for r in self.query.relations) if self.loading else self.updatable

    def _build(self) -> Hierarchy:
        """The hierarchy of the relations accepted now; views it no longer has are dropped (their
        contents were maintained while static relations loaded)."""
        h = Hierarchy(self.query, self._active(), [p for _, p in self.aggregates])
        names = {d.name: d for d in h.defs.values()}
        for name in list(self.views):
            if name not in names:
                # Keys deleted since the last checkpoint are still stored: drop them too.
                view = self.views.pop(name)
                self.dropped[name] = list(dict.fromkeys([*view.data, *view.changed]))
        for name, d in names.items():
            if name not in self.views:
                ring = self.ring_of(d.powers)
                self.views[name] = View(name, d.keys, ring.add, ring.is_zero)
        probes = [p for ts in h.triggers.values() for t in ts for p in t.probes]
        sync_indexes(self.views, index_needs(probes))
        return h

    def seal(self) -> None:
        if self.loading:
            self.loading = False
            self.hierarchy = self._build()

    def rebuild_derived(self) -> None:
        self.hierarchy = self._build()

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        """Every trigger of ``base``; they read only views without ``base``, so their order is free."""
        views = self.views
        for trig in self.hierarchy.triggers[base]:
            ring = self.ring_of(trig.powers)
            one = ring.one()
            rows = run_probes([(t, ring.scale(m, one)) for t, m in delta.items()], trig.probes, views, ring)
            d = group(rows, trig.out, trig.lifts, ring)
            views[trig.view].add_all((k, p) for k, p in d.items() if not ring.is_zero(p))

    def roots(self) -> list[View]:
        roots = self.hierarchy.roots
        if not self.scalar:
            return [self.views[roots[0].name]]
        dense = self.ring.inner
        assert isinstance(dense, DenseCofactorRing)
        results = [(mono, self.views[d.name]) for (mono, _), d in zip(self.aggregates, roots, strict=True)]
        keys: dict[Key, None] = {}
        for _, view in results:
            keys.update(dict.fromkeys(view.data))
        data = {k: dense.from_aggregates({mono: v.data.get(k, 0) for mono, v in results}) for k in keys}
        return [transient_view("Q", roots[0].keys, self.ring, data)]


def dbt_scalar(query: Query) -> DbtMaintainer:
    return DbtMaintainer(query, scalar=True)


def dbt_ring(query: Query) -> DbtMaintainer:
    return DbtMaintainer(query, scalar=False)
