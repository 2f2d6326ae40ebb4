"""First-order IVM (strategies ``1-ivm`` and ``1-ivm-ring``): base relations and the result, nothing else.

docs/fivm/baselines.md §3. For a delta δR each tuple binds sch(R); the other relations
fall into connected components (relations sharing a variable that is neither bound by R nor a
group-by variable); each component's aggregate is evaluated on the fly from the stored base
relations through indexes on the variables it is probed by, grouped by the variables it shares with
R and the group-by variables; the components' aggregates are joined on the group-by variables they
share, multiplied with δR and the lifts of R's variables, and added to the result.

``1-ivm`` keeps scalar payloads: for the covariance ring it runs one delta query per aggregate (the
count, each Σ x_i, each Σ x_i·x_j) and stores one result per aggregate; ``1-ivm-ring`` runs one delta
query with ring payloads. Self-joins are not supported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ivmstream.services.fivm.baselines.common import (
    Monomial,
    PerAggregateBaseline,
    Probe,
    group,
    index_needs,
    int_view,
    monomial_label,
    plan_probes,
    run_probes,
    scalar_aggregates,
    transient_view,
)
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.rings import Ring
from ivmstream.services.fivm.rings.dense_cofactor import DenseCofactorRing
from ivmstream.services.fivm.views import Key, View, sync_indexes


def components(rels: list[tuple[str, tuple[str, ...]]], cut: set[str]) -> list[list[str]]:
    """Connected components of ``rels`` (name, columns): two relations are connected when they share a
    variable outside ``cut``. Components and their members keep the given order."""
    parent = {name: name for name, _ in rels}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    owner: dict[str, str] = {}
    for name, cols in rels:
        for v in cols:
            if v in cut:
                continue
            if v in owner:
                parent[find(name)] = find(owner[v])
            else:
                owner[v] = name
    groups: dict[str, list[str]] = {}
    for name, _ in rels:
        groups.setdefault(find(name), []).append(name)
    return list(groups.values())


@dataclass(frozen=True)
class Component:
    """One residual component for updates to one relation."""

    relations: tuple[str, ...]
    keys: tuple[str, ...]  # its variables in sch(R) or group-by: what it is grouped by
    bound: tuple[int, ...]  # positions in R's tuple of the keys R binds (the evaluation's start row)
    probes: tuple[Probe, ...]  # joining the component's relations, starting from the bound keys
    out: tuple[int, ...]  # row positions of ``keys`` after the probes
    lifts: tuple[tuple[str, int], ...]  # the component's own variables (summed out inside it)
    check: tuple[tuple[int, int], ...]  # (key position, row position): keys bound by earlier components
    extend: tuple[int, ...]  # key positions of group-by variables first met in this component


@dataclass(frozen=True)
class DeltaPlan:
    relation: str
    comps: tuple[Component, ...]
    out: tuple[int, ...]  # row positions of the group-by variables
    lifts: tuple[tuple[str, int], ...]  # R's variables that are not group-by variables


def compile_delta_plan(query: Query, relation: str, rank: dict[str, int]) -> DeltaPlan:
    occ = {o.name: o for o in query.occurrences}
    r = occ[relation]
    bound = set(r.columns)
    free = set(query.group_by)
    others = [(o.name, o.columns) for o in query.occurrences if o.name != relation]
    row = list(r.columns)
    comps: list[Component] = []
    for members in components(others, bound | free):
        cvars = {v for m in members for v in occ[m].columns}
        keys = tuple(sorted(cvars & (bound | free), key=rank.__getitem__))
        start = [v for v in keys if v in bound]
        probes, crow = plan_probes(start, [(m, occ[m].columns, True) for m in members])
        cpos = {v: i for i, v in enumerate(crow)}
        lifts = tuple((v, cpos[v]) for v in sorted(cvars - bound - free, key=rank.__getitem__))
        rpos = {v: i for i, v in enumerate(row)}
        check = tuple((i, rpos[v]) for i, v in enumerate(keys) if v in rpos and v not in bound)
        extend = tuple(i for i, v in enumerate(keys) if v not in rpos)
        comps.append(
            Component(
                relations=tuple(members),
                keys=keys,
                bound=tuple(rpos[v] for v in start),
                probes=probes,
                out=tuple(cpos[v] for v in keys),
                lifts=lifts,
                check=check,
                extend=extend,
            )
        )
        row.extend(keys[i] for i in extend)
    pos = {v: i for i, v in enumerate(row)}
    return DeltaPlan(
        relation=relation,
        comps=tuple(comps),
        out=tuple(pos[v] for v in query.group_by),
        lifts=tuple((v, pos[v]) for v in r.columns if v not in free),
    )


class FirstOrderMaintainer(PerAggregateBaseline):
    """Strategy ``1-ivm`` (``scalar``: one delta query per aggregate) or ``1-ivm-ring`` (§3)."""

    def __init__(self, query: Query, scalar: bool = True) -> None:
        super().__init__(query, scalar)
        self.aggregates: list[tuple[Monomial, Ring[Any]]] = (
            scalar_aggregates(query, self.lifted) if scalar else [((), self.result_ring)]
        )
        self.views: dict[str, View] = {r.name: int_view(r.name, r.columns) for r in query.relations}
        self.results: list[tuple[Monomial, Ring[Any], View]] = []
        for mono, ring in self.aggregates:
            name = f"Q@{monomial_label(mono, self.lifted)}" if self.scalar else "Q@result"
            view = View(name, query.group_by, ring.add, ring.is_zero)
            self.views[name] = view
            self.results.append((mono, ring, view))
        rank = {v: i for i, v in enumerate(query.variables)}
        self.plans = {r.name: compile_delta_plan(query, r.name, rank) for r in query.relations}
        self.rebuild_derived()

    def seal(self) -> None:
        if self.loading:
            self.loading = False
            self.rebuild_derived()

    def rebuild_derived(self) -> None:
        """The indexes the delta plans of the relations accepted now probe."""
        active = [r.name for r in self.query.relations if self.loading or r.name in self.updatable]
        probes = [p for r in active for c in self.plans[r].comps for p in c.probes]
        sync_indexes(self.views, index_needs(probes))

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        plan = self.plans[base]
        for _, ring, view in self.results:
            d = self._delta(plan, delta, ring)
            view.add_all((k, p) for k, p in d.items() if not ring.is_zero(p))
        self.views[base].add_all(delta.items())

    def _delta(self, plan: DeltaPlan, delta: dict[Key, int], ring: Ring[Any]) -> dict[Key, Any]:
        """δQ for one aggregate: per tuple of δR, each component's aggregate (evaluated once per
        distinct binding of the batch) joined on shared group-by variables, times δR and R's lifts."""
        one, mul = ring.one(), ring.mul
        memo: list[dict[Key, list[tuple[Key, Any]]]] = [{} for _ in plan.comps]
        out: dict[Key, Any] = {}
        for t, m in delta.items():
            rows: list[tuple[Key, Any]] = [(t, ring.scale(m, one))]
            for comp, cache in zip(plan.comps, memo, strict=True):
                b = tuple([t[i] for i in comp.bound])
                res = cache.get(b)
                if res is None:
                    joined = run_probes([(b, one)], comp.probes, self.views, ring)
                    agg = group(joined, comp.out, comp.lifts, ring)
                    res = cache[b] = [(k, p) for k, p in agg.items() if not ring.is_zero(p)]
                nxt: list[tuple[Key, Any]] = []
                for row, p in rows:
                    for k, q in res:
                        if all(k[i] == row[j] for i, j in comp.check):
                            nxt.append((row + tuple([k[i] for i in comp.extend]), mul(p, q)))
                rows = nxt
                if not rows:
                    break
            group(rows, plan.out, plan.lifts, ring, into=out)
        return out

    def roots(self) -> list[View]:
        if not self.scalar:
            return [self.results[0][2]]
        dense = self.ring.inner
        assert isinstance(dense, DenseCofactorRing)
        keys: dict[Key, None] = {}
        for _, _, view in self.results:
            keys.update(dict.fromkeys(view.data))
        results = [(mono, v) for mono, _, v in self.results]
        data = {k: dense.from_aggregates({mono: v.data.get(k, 0) for mono, v in results}) for k in keys}
        return [transient_view("Q", self.query.group_by, self.ring, data)]


def first_order_scalar(query: Query) -> FirstOrderMaintainer:
    return FirstOrderMaintainer(query, scalar=True)


def first_order_ring(query: Query) -> FirstOrderMaintainer:
    return FirstOrderMaintainer(query, scalar=False)
