"""F-IVM maintenance: materialized views of one view tree, kept current by per-relation triggers.

docs/fivm/algorithm.md §2.5 to §2.7 and §2.9. An update to relation R is one consolidated delta (tuple ->
non-zero multiplicity) propagated from each of R's leaves to the root in sequence: R's own leaf, each
alias of R (self-joins), then R's indicator projections. Each step joins the delta with the stored
siblings, multiplies payloads (and the lift of a bound variable), groups by the parent's keys and adds
the result into the parent when it is materialized.

Static relations (not in U) load before the first update to U: until then every view of μ(τ, all) is
maintained; at the first update to U the views outside μ(τ, U) are dropped (§2.7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.fivm import columnar
from ivmstream.services.fivm.order import VariableOrder, build_order
from ivmstream.services.fivm.query import RING_FACTORY, Query
from ivmstream.services.fivm.rings import Ring, make_ring
from ivmstream.services.fivm.triggers import GET, INDEX, LeafPlan, Step, compile_plans, required_indexes
from ivmstream.services.fivm.views import Key, View, sync_indexes
from ivmstream.services.fivm.viewtree import INDICATOR, LEAF, ViewTree, build_view_tree, materialized

Delta = dict[Key, Any]


class Support:
    """A base relation as full tuple -> multiplicity (never 0), for indicator projections (§2.9)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.data: dict[Key, int] = {}
        self.changed: dict[Key, None] = {}

    def add(self, t: Key, m: int) -> tuple[int, int]:
        """Add m copies of t; returns (old, new) multiplicity."""
        old = self.data.get(t, 0)
        new = old + m
        if new:
            self.data[t] = new
        else:
            del self.data[t]
        self.changed[t] = None
        return old, new


class FivmMaintainer:
    """The view tree, its materialized views and trigger plans for one query (strategies fivm, fivm-one)."""

    def __init__(self, query: Query) -> None:
        self.query = query
        self.order: VariableOrder = build_order(query)
        self.tree: ViewTree = build_view_tree(query, self.order)
        try:
            self.ring: Ring[Any] = make_ring(
                RING_FACTORY.get(query.ring, query.ring), self.tree.lifted, **query.ring_factory_options()
            )
        except ValueError as exc:
            raise EngineError(f"ring {query.ring}: {exc}") from None
        self.nodes = self.tree.by_name()
        self.plans = compile_plans(self.tree, query)
        self.relations = tuple(r.name for r in query.relations)
        self.updatable = frozenset(query.updatable)
        # §2.7: with static relations, the engine starts in the loading phase.
        self.loading = bool(set(self.relations) - self.updatable)
        self.views: dict[str, View] = {}
        self.dropped: dict[str, list[Key]] = {}  # views dropped at the seal, with their keys, until drained
        with_indicators = {p.occurrence for ps in self.plans.values() for p in ps if p.kind == INDICATOR}
        self.supports: dict[str, Support] = {
            r: Support(r)
            for r in self.relations
            if query.debug or any(o.name in with_indicators for o in query.occurrences_of(r))
        }
        self.counts: dict[str, dict[Key, int]] = {
            p.leaf: {} for ps in self.plans.values() for p in ps if p.kind == INDICATOR
        }
        self._one = self.ring.one()
        self._materialize()

    # --- materialization -------------------------------------------------------------------------------

    def active_relations(self) -> frozenset[str]:
        """Relations whose updates are accepted now: every relation while loading, else U."""
        return frozenset(self.relations) if self.loading else self.updatable

    def target_views(self) -> frozenset[str]:
        active = self.active_relations()
        occs = {o.name for o in self.query.occurrences if o.base in active}
        return materialized(self.tree, occs, self.query.distributed)

    def _materialize(self) -> None:
        """Create the views of μ (empty), drop the others, and keep exactly the indexes the plans of the
        active relations probe."""
        target = self.target_views()
        for name in list(self.views):
            if name not in target:
                view = self.views.pop(name)
                # Its stored entries: the keys it holds, and the keys deleted since the last checkpoint
                # (still in the store until that checkpoint deletes them).
                self.dropped[name] = list(dict.fromkeys([*view.data, *view.changed]))
        ring = self.ring
        for node in self.tree.nodes():
            if node.name in target and node.name not in self.views:
                self.views[node.name] = View(node.name, node.keys, ring.add, ring.is_zero)
        sync_indexes(self.views, required_indexes(self.plans, set(self.active_relations())))

    @property
    def columnar(self) -> bool:
        """Whole relation deltas run in columns where the ring has column payloads (§2.14)."""
        return self.query.execution == "auto" and columnar.supports(self.ring)

    def seal(self) -> None:
        """End the loading phase (the first update to U arrived): keep only μ(τ, U)."""
        if self.loading:
            self.loading = False
            self._materialize()

    def rebuild_derived(self) -> None:
        """Indexes and indicator counts from the stored views and supports (after a restore)."""
        self._materialize()
        for plans in self.plans.values():
            for plan in plans:
                if plan.kind != INDICATOR:
                    continue
                counts = self.counts[plan.leaf] = {}
                for t in self.supports[self.query_base(plan.occurrence)].data:
                    a = tuple([t[i] for i in plan.key_pos])
                    counts[a] = counts.get(a, 0) + 1

    def query_base(self, occurrence: str) -> str:
        return next(o.base for o in self.query.occurrences if o.name == occurrence)

    # --- updates -----------------------------------------------------------------------------------------

    def apply_relation(self, base: str, delta: dict[Key, int]) -> None:
        """Propagate one consolidated delta of ``base`` (no zero multiplicities) through all its leaves."""
        transitions: list[tuple[Key, int]] = []
        support = self.supports.get(base)
        if support is not None:
            for t, m in delta.items():
                old, new = support.add(t, m)
                if not old:
                    transitions.append((t, 1))
                elif not new:
                    transitions.append((t, -1))
        in_columns = self.columnar
        for plan in self.plans[base]:
            if in_columns and plan.kind == LEAF:
                try:
                    changes = columnar.propagate(self.ring, plan, self.views, delta)  # type: ignore[arg-type]
                except columnar.Unrepresentable:
                    pass
                else:
                    columnar.apply_changes(changes)
                    continue
            d = (
                self._leaf_delta(plan, delta)
                if plan.kind == LEAF
                else self._indicator_delta(plan, transitions)
            )
            if d:
                self._propagate(plan, d)

    def _leaf_delta(self, plan: LeafPlan, delta: dict[Key, int]) -> Delta:
        """δ of the leaf: base tuples projected on its keys, payload m·Π lifts of the composed variables."""
        ring = self.ring
        key_pos = plan.key_pos
        lifted = plan.lifted
        block = getattr(ring, "lift_block", None)
        whole = getattr(ring, "leaf_delta", None)
        if whole is not None:  # the ring builds the leaf's δ for the whole relation delta (§2.14)
            return whole([v for v, _ in lifted], [i for _, i in lifted], key_pos, delta)  # type: ignore[no-any-return]
        out: Delta = {}
        for t, m in delta.items():
            if not lifted:
                p = ring.scale(m, self._one)
            elif block is not None:
                p = ring.scale(m, block([v for v, _ in lifted], [t[i] for _, i in lifted]))
            else:
                p = self._one
                for v, i in lifted:
                    p = ring.mul(p, ring.lift(v, t[i]))
                p = ring.scale(m, p)
            key = tuple([t[i] for i in key_pos])
            prev = out.get(key)
            out[key] = p if prev is None else ring.add(prev, p)
        return {k: p for k, p in out.items() if not ring.is_zero(p)}

    def _indicator_delta(self, plan: LeafPlan, transitions: list[tuple[Key, int]]) -> Delta:
        """δ∃ (§2.9): +1 for projections whose count of supporting tuples went 0 -> positive, -1 for
        positive -> 0, from the base tuples whose multiplicity went 0 <-> non-zero."""
        counts = self.counts[plan.leaf]
        before: dict[Key, bool] = {}
        for t, s in transitions:
            a = tuple([t[i] for i in plan.key_pos])
            c = counts.get(a, 0)
            before.setdefault(a, c > 0)
            if c + s:
                counts[a] = c + s
            else:
                del counts[a]
        out: Delta = {}
        for a, was in before.items():
            now = a in counts
            if now != was:
                out[a] = self.ring.scale(1 if now else -1, self._one)
        return out

    def _propagate(self, plan: LeafPlan, delta: Delta) -> None:
        """The trigger of §2.5 along one leaf-to-root path; every materialized view on it is updated."""
        ring = self.ring
        mul, add, is_zero = ring.mul, ring.add, ring.is_zero
        # Map payloads are summed once per key (§2.14): pairwise adds would copy a growing map per row.
        sum_all = getattr(ring, "sum_all", None)
        groups: dict[Key, list[Any]] = {}
        views = self.views
        leaf = views.get(plan.leaf)
        if leaf is not None:
            if all(p.__class__ is int for p in delta.values()):
                leaf.add_count_map(delta)
            else:
                leaf.add_all(delta.items())
        lift_sum = getattr(ring, "lift_sum", None)
        for step in plan.steps:
            out: Delta | None = None
            if lift_sum is not None:
                out = self._count_step(step, delta, lift_sum)
            elif sum_all is None and all(pr.mode == GET for pr in step.probes):
                out = self._point_step(step, delta)
            if out is not None:
                delta = out
                target = views.get(step.view)
                if target is not None:
                    target.add_all(delta.items())
                if not delta:
                    break
                continue
            out = {}
            for key, p in delta.items():
                rows: list[tuple[Key, tuple[Any, ...]]] = [(key, (p,))]
                for probe in step.probes:
                    view = views[probe.view]
                    data = view.data
                    nxt: list[tuple[Key, tuple[Any, ...]]] = []
                    if probe.mode == GET:
                        for row, pays in rows:
                            q = data.get(tuple([row[i] for i in probe.probe]))
                            if q is not None:
                                nxt.append((row, (*pays, q)))
                    elif probe.mode == INDEX:
                        ext = probe.extend
                        for row, pays in rows:
                            for k in view.lookup(probe.index, tuple([row[i] for i in probe.probe])):
                                nxt.append((row + tuple([k[i] for i in ext]), (*pays, data[k])))
                    else:
                        ext = probe.extend
                        for row, pays in rows:
                            for k, q in data.items():
                                nxt.append((row + tuple([k[i] for i in ext]), (*pays, q)))
                    rows = nxt
                    if not rows:
                        break
                order = step.mul_order
                for row, pays in rows:
                    prod = pays[order[0]]
                    for i in order[1:]:
                        prod = mul(prod, pays[i])
                    if step.lift_pos >= 0:
                        prod = mul(ring.lift(step.lift_var, row[step.lift_pos]), prod)
                    ok = tuple([row[i] for i in step.out])
                    if sum_all is None:
                        prev = out.get(ok)
                        out[ok] = prod if prev is None else add(prev, prod)
                    else:
                        parts = groups.get(ok)
                        if parts is None:
                            groups[ok] = [prod]
                        else:
                            parts.append(prod)
            if sum_all is not None:
                out = {k: sum_all(parts) for k, parts in groups.items()}
                groups = {}
            delta = {k: v for k, v in out.items() if not is_zero(v)}
            target = views.get(step.view)
            if target is not None:
                target.add_all(delta.items())
            if not delta:
                break

    def _point_step(self, step: Step, delta: Delta) -> Delta:
        """One trigger step whose siblings are all point lookups (each sibling's keys bound by the delta's,
        a star's root): per delta key, the siblings' payloads multiplied in the step's order, so the
        same ring operations and results as the general loop, without its per-key rows and tuples."""
        ring = self.ring
        mul, add, is_zero, lift = ring.mul, ring.add, ring.is_zero, ring.lift
        views = self.views
        width = len(next(iter(delta), ()))
        same = tuple(range(width))
        # A sibling keyed like the delta is probed with the delta's key itself.
        siblings = [(views[pr.view].data, None if pr.probe == same else pr.probe) for pr in step.probes]
        first, *rest = step.mul_order
        lift_pos, lift_var = step.lift_pos, step.lift_var
        out_pos = None if step.out == same else step.out
        pays: list[Any] = [None] * (len(siblings) + 1)
        out: Delta = {}
        for key, p in delta.items():
            pays[0] = p
            for n, (data, pos) in enumerate(siblings, 1):
                q = data.get(key if pos is None else tuple([key[i] for i in pos]))
                if q is None:
                    break
                pays[n] = q
            else:
                prod = pays[first]
                for i in rest:
                    prod = mul(prod, pays[i])
                if lift_pos >= 0:
                    prod = mul(lift(lift_var, key[lift_pos]), prod)
                ok = key if out_pos is None else tuple([key[i] for i in out_pos])
                prev = out.get(ok)
                out[ok] = prod if prev is None else add(prev, prod)
        return {k: v for k, v in out.items() if not is_zero(v)}

    def _count_step(
        self, step: Step, delta: Delta, lift_sum: Callable[[str, dict[Any, int]], Any]
    ) -> Delta | None:
        """One trigger step when the delta and every sibling it meets hold plain int counts and the
        siblings are point lookups (a star's root, §2.14): per parent key, Σ count · lift(x) with the
        counts summed per value first; None (nothing changed) when any payload is not an int."""
        if not all(p.__class__ is int for p in delta.values()) or any(pr.mode != GET for pr in step.probes):
            return None
        views = self.views
        probes = [(views[pr.view].data, pr.probe) for pr in step.probes]
        out_pos = step.out
        lift_pos = step.lift_pos
        acc: dict[Key, dict[Any, int]] = {}
        # A sibling keyed like the delta (a star's root, §2.14) is probed with the delta's key itself.
        width = len(next(iter(delta), ()))
        keyed = [(data, None if pos == tuple(range(width)) else pos) for data, pos in probes]
        for key, p in delta.items():
            prod = p
            for data, pos in keyed:
                q = data.get(key if pos is None else tuple([key[i] for i in pos]))
                if q is None:
                    break
                if q.__class__ is not int:
                    return None
                prod *= q
            else:
                ok = tuple([key[i] for i in out_pos]) if out_pos else ()
                x = key[lift_pos] if lift_pos >= 0 else None
                weights = acc.get(ok)
                if weights is None:
                    acc[ok] = {x: prod}
                else:
                    weights[x] = weights.get(x, 0) + prod
        var = step.lift_var if lift_pos >= 0 else None
        out: Delta = {}
        for ok, weights in acc.items():
            payload = lift_sum(var, weights) if var is not None else sum(weights.values())
            if not self.ring.is_zero(payload):
                out[ok] = payload
        return out

    # --- reading -----------------------------------------------------------------------------------------

    def roots(self) -> list[View]:
        """The root view of each tree of the forest; the query is their product (§2.11)."""
        return [self.views[r.name] for r in self.tree.roots]
