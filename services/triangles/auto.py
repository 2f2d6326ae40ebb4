"""Strategy ``auto``: run the plan that is cheapest for the updates actually seen, switch when it pays.

docs/triangles/algorithm.md §4.7 explains the rule. In short: the engine runs one plan at a time
(first-order, IVM^ε at ε = ½, or in relations mode one single-view plan that answers updates to one
relation with a lookup) and, for sampled updates, prices what every other plan would have paid for
the same update from the degrees it can read in O(1). The running excess of the current plan over a
candidate (its *regret*, never below 0) is compared with the candidate's estimated rebuild cost; once
the excess has paid for the rebuild, the candidate is rebuilt from the live relations and Q is carried
over. So a wrong plan costs at most about twice what the better one would have (the ski-rental
argument), and every switch is paid for by the updates that made it worth doing.

Exactness does not depend on the choice: every plan is an exact engine over the same relations, and a
switch builds the new plan's state (indexes, parts, views) from those relations. Costs are integer
nanosecond estimates, so decisions are deterministic and survive snapshot and restore unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from ivmstream.sdk import EngineError, Entry, EntryChange, Rejection, UpdateEvent
from ivmstream.services.triangles.base import REL_NAMES, VIEW_NAMES, Index, TriangleEngine, json_int
from ivmstream.services.triangles.baselines import FirstOrderEngine, ViewEngine, _FullRelations
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine
from ivmstream.services.triangles.simple_graph import PRICE, PYTHON

FIRST_ORDER = "first-order"
IVM_EPS = "ivm-eps"
AUTO_EPSILON = "1/2"


@dataclass(frozen=True)
class CostModel:
    """Estimated wall cost in nanoseconds (integers, so every decision is exact and reproducible).

    Set from per-update times measured with bench/triangles.py (docs/triangles/algorithm.md §4.7);
    only the ratios matter."""

    first_order: int = 1_000  # fixed cost of one first-order update
    ivm_eps: int = 3_000  # fixed cost of one IVM^ε update (three views, part routing, triggers)
    view_served: int = 700  # a single-view plan answering an update to the relation it serves
    view_other: int = 2_500  # the same plan on another relation: intersect, then maintain the view
    per_work: int = 60  # one work unit: a dict probe or loop iteration
    rebuild_fixed: int = 50_000  # any rebuild: no switch on the noise of a handful of updates
    rebuild_per_tuple: int = 250  # the second-variable index of one tuple (leaving IVM^ε)
    rebuild_per_view_entry: int = 250  # one wedge Σ_v |j(·,v)|·|j+1(v,·)| of a rebuilt view
    eps_rebuild_per_tuple: int = 350  # IVM^ε from any plan: parts, heavy indexes and views, per tuple
    switch_percent: int = 50  # switch once the regret reaches this share of the rebuild's cost
    cheap_work: int = 64  # updates cheaper than this are sampled ...
    sample_stride: int = 16  # ... one in this many, weighted by it


DEFAULT_COSTS = CostModel()


def plan_names(graph: bool) -> tuple[str, ...]:
    """The plans ``auto`` chooses among: single-view plans only exist with three distinct relations."""
    if graph:
        return (FIRST_ORDER, IVM_EPS)
    return (FIRST_ORDER, IVM_EPS, *(view_plan(k) for k in range(3)))


def view_plan(k: int) -> str:
    """The single-view plan answering updates to relation k: it keeps the view of the other two."""
    return f"view-{VIEW_NAMES[(k + 1) % 3]}"


FO, EPS, VIEW = 0, 1, 2


def _kind(name: str) -> int:
    return FO if name == FIRST_ORDER else EPS if name == IVM_EPS else VIEW


def _served(name: str) -> int:
    """The relation a single-view plan answers with a lookup (-1 for the other plans)."""
    if not name.startswith("view-"):
        return -1
    return (VIEW_NAMES.index(name[5:]) + 2) % 3


def new_plan(name: str, mode: str) -> TriangleEngine:
    if name == FIRST_ORDER:
        return FirstOrderEngine(mode)
    if name == IVM_EPS:
        return IvmEpsEngine(mode, AUTO_EPSILON)
    return ViewEngine(mode, views=((_served(name) + 1) % 3,))


def relations_of(plan: TriangleEngine) -> list[Index]:
    """The live relations of a plan, by first variable (rows are shared, not copied)."""
    if isinstance(plan, IvmEpsEngine):
        return [{**plan.hf[k], **plan.lf[k]} for k in range(plan.nrel)]
    if isinstance(plan, FirstOrderEngine | ViewEngine):
        return plan.fwd
    raise EngineError(f"auto cannot run plan {plan.strategy!r}")


def build_plan(name: str, mode: str, old: TriangleEngine, q: int) -> tuple[TriangleEngine, int]:
    """Plan ``name`` over the relations of plan ``old``, whose count is ``q``; returns it and its work.

    Between first-order and a single-view plan both indexes are handed over as they are (the rows
    are moved, not copied) and only the view is built. IVM^ε gets the strict partition at
    N = 2|D|+1, as after BUILD (§2.5). Q is not recounted."""
    plan = new_plan(name, mode)
    if isinstance(old, _FullRelations) and isinstance(plan, _FullRelations):
        plan.fwd, plan.bwd, plan.rsize, plan.size = old.fwd, old.bwd, list(old.rsize), old.size
        plan._rebuild_derived()
        work = sum(len(v) for v in getattr(plan, "views", ()))
    else:
        plan._load_tuples(relations_of(old), set())
        if isinstance(plan, IvmEpsEngine):
            work = plan._repartition(2 * plan.size + 1)
        else:
            work = plan.size + sum(len(v) for v in getattr(plan, "views", ()))
    plan.q = q
    return plan, work


class AutoEngine(TriangleEngine):
    """Strategy ``auto``: one exact plan at a time, chosen and switched by the regret rule above."""

    strategy = "auto"
    _COUNTERS: ClassVar[tuple[str, ...]] = (*TriangleEngine._COUNTERS, "switches", "switch_work_total")

    def __init__(self, mode: str = "graph", costs: CostModel = DEFAULT_COSTS) -> None:
        # Q, |D| and the tuple count are the plan's (the properties below), so the plan comes first:
        # first-order, cheapest to build and to run until updates say otherwise.
        self.plan: TriangleEngine = new_plan(FIRST_ORDER, mode)
        super().__init__(mode)
        self.costs = costs
        self.plans = plan_names(self.graph)
        self.regret = dict.fromkeys(self.plans, 0)
        self.reason = "initial plan: first-order needs no views and no partition"
        self.switches = 0
        self.switch_work_total = 0
        self.observed = 0  # updates priced since the last switch (sampled ones count their weight)
        self._skip = costs.sample_stride  # cheap updates left until the next sampled one
        self._stride = costs.sample_stride
        self._cheap_work = costs.cheap_work
        self._cheap_pair = 2 * costs.cheap_work  # a graph event is two updates
        self._served = -1
        self._candidates = [(p, _kind(p), _served(p)) for p in self.plans if p != FIRST_ORDER]
        self._coldeg: list[dict[Any, int]] = []  # IVM^ε plan: tuples per second-variable value
        self._join_cache: dict[str, tuple[int, int]] = {}  # view plan -> (|D| when counted, entries)
        self._pending: dict[str, Any] | None = None  # the decision entry while restoring from entries
        self.plan_name = FIRST_ORDER
        self._install(FIRST_ORDER, self.plan)

    # Read through to the plan rather than copied after every batch: nothing to keep in step.
    @property
    def q(self) -> int:
        return self.plan.q

    @q.setter
    def q(self, value: int) -> None:
        self.plan.q = value

    @property
    def size(self) -> int:
        return self.plan.size

    @size.setter
    def size(self, value: int) -> None:
        self.plan.size = value

    @property
    def tuple_updates(self) -> int:
        return self.plan.tuple_updates

    @tuple_updates.setter
    def tuple_updates(self, value: int) -> None:
        self.plan.tuple_updates = value

    # --- one update -----------------------------------------------------------------------------

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        plan = self.plan
        w0 = plan.work
        if self._coldeg:
            s0 = plan.size
            self._plan_update(k, x, y, m)
            if plan.size != s0:
                deg = self._coldeg[k]
                c = deg.get(y, 0) + plan.size - s0
                if c:
                    deg[y] = c
                else:
                    del deg[y]
        else:
            self._plan_update(k, x, y, m)
        work = plan.work - w0
        self.work += work
        if work < self._cheap_work:
            self._skip -= 1
            if self._skip:
                return
            self._skip = self._stride
            self._price(k, x, y, work, self._stride)
        else:
            self._price(k, x, y, work, 1)

    def _update_pair(self, u: Any, v: Any, m: int) -> None:  # type: ignore[override]
        """A graph event: both directions in the plan, priced once as two updates of half its work
        (the two directions intersect the same two rows, so they cost alike)."""
        plan = self.plan
        w0 = plan.work
        update = self._plan_update
        update(0, u, v, m)
        update(0, v, u, m)
        work = plan.work - w0
        self.work += work
        if work < self._cheap_pair:
            self._skip -= 1
            if self._skip:
                return
            self._skip = self._stride
            self._price(0, u, v, work // 2, 2 * self._stride)
        else:
            self._price(0, u, v, work // 2, 2)

    def _price(self, k: int, x: Any, y: Any, work: int, weight: int) -> None:
        """Add this update's cost difference to every candidate's regret; switch if one has paid off."""
        c = self.costs
        row, col = self._row_col(k, x, y)
        fo = min(row, col)
        size = self.plan.size
        per_work = c.per_work
        spent = (c.view_served if self._served == k else self._spent_fixed) + per_work * work
        self.observed += weight
        best, best_margin = None, 0
        regret = self.regret
        floor = self._regret_floor
        for name, kind, served in self._candidates:
            if kind == FO:
                would = c.first_order + per_work * fo
            elif kind == EPS:  # IVM^ε at ε = ½ walks O(√N) per update (§3)
                would = c.ivm_eps + per_work * min(fo, 2 * math.isqrt(size) + 1)
            elif served == k:
                would = c.view_served
            else:  # intersect as first-order, then walk the row (or column) that maintains the view
                upkeep = row if (k + 1) % 3 == (served + 1) % 3 else col
                would = c.view_other + per_work * (fo + upkeep)
            r = regret[name] + weight * (spent - would)
            if r <= 0:
                regret[name] = 0
                continue
            regret[name] = r
            if r * 100 <= floor:
                continue  # below every plan's rebuild cost: no need to price this one's
            margin = r * 100 - c.switch_percent * self._rebuild_cost(name, size)
            if margin > best_margin:
                best, best_margin = name, margin
        if best is not None:
            cur = self.plan_name
            self.reason = (
                f"{best} instead of {cur}: over {self.observed} updates the estimated excess of "
                f"{cur} ({regret[best] // 1000} us) paid for rebuilding {best} from the relations"
            )
            self.switch_to(best)

    def _row_col(self, k: int, x: Any, y: Any) -> tuple[int, int]:
        """|next(y, ·)| and |prev(·, x)|: the two rows a first-order update would intersect."""
        nxt, prv = self._nxt[k], self._prv[k]
        plan = self.plan
        if isinstance(plan, IvmEpsEngine):
            row = len(plan.hf[nxt].get(y, ())) + len(plan.lf[nxt].get(y, ()))
            if self.graph:  # E is symmetric: the column of x is its row
                col = len(plan.hf[0].get(x, ())) + len(plan.lf[0].get(x, ()))
            else:
                col = self._coldeg[prv].get(x, 0)
            return row, col
        if isinstance(plan, FirstOrderEngine):  # its dict indexes may lag its compiled mirror
            return plan.row_col(k, x, y)
        fwd, bwd = plan.fwd, plan.bwd  # type: ignore[attr-defined]
        return len(fwd[nxt].get(y, ())), len(bwd[prv].get(x, ()))

    def _rebuild_cost(self, name: str, size: int) -> int:
        """What switching to ``name`` costs from the current plan: first-order and the single-view
        plans share both indexes, so between them only a view is built (or dropped); leaving IVM^ε
        also builds the second-variable indexes."""
        c = self.costs
        if name == IVM_EPS:
            return c.rebuild_fixed + c.eps_rebuild_per_tuple * size
        cost = c.rebuild_fixed
        if _kind(self.plan_name) == EPS:
            cost += c.rebuild_per_tuple * size
        if name == FIRST_ORDER:
            return cost
        # The view joins relation j with relation j + 1 on their shared value. Its size is counted in
        # O(distinct values), and kept until |D| has halved or doubled since (part of the decision state).
        j = (_served(name) + 1) % 3
        at, entries = self._join_cache.get(name, (-1, 0))
        if not (at // 2 <= size <= 2 * at) or at < 0:
            entries = self._join_size(j)
            self._join_cache[name] = (size, entries)
        return cost + c.rebuild_per_view_entry * entries

    def _join_size(self, j: int) -> int:
        """Wedges of the view joining relation j with j+1 (an upper bound on its entries):
        Σ_v |j(·,v)|·|j+1(v,·)|, from per-value degrees the current plan keeps."""
        plan = self.plan
        if isinstance(plan, IvmEpsEngine):
            hf, lf = plan.hf[(j + 1) % 3], plan.lf[(j + 1) % 3]
            return sum(n * (len(hf.get(v, ())) + len(lf.get(v, ()))) for v, n in self._coldeg[j].items())
        if not isinstance(plan, _FullRelations):
            raise EngineError(f"auto cannot run plan {plan.strategy!r}")
        right = plan.fwd[(j + 1) % 3]
        return sum(len(col) * len(right.get(v, ())) for v, col in plan.bwd[j].items())

    def _apply_graph(
        self,
        events: Sequence[UpdateEvent],
        rejected: list[Rejection],
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        """Graph events through the first-order plan's compiled mirror (simple_graph.py) while that plan
        runs: it stops after each update the rule above prices, so a switch takes effect before the
        next event, exactly as on the Python path."""
        plan = self.plan
        g = plan.simple_graph() if stop is None and isinstance(plan, FirstOrderEngine) else None
        if g is None or not isinstance(plan, FirstOrderEngine):
            super()._apply_graph(events, rejected, start, stop)
            return
        batch = events if events.__class__ is list else list(events)
        changes = None if self._all_changed else self._edge_changes
        stride, cheap = self._stride, self._cheap_pair
        i, n = start, len(batch)
        while i < n:
            i, status, dq, dsize, dwork, devents, work_last, self._skip, u, v, work, weight = g.run(
                batch, i, changes, self._skip, stride, cheap
            )
            plan.absorb(self, dq, dsize, dwork, devents, work_last)
            if status == PRICE:
                self._price(0, u, v, work // 2, weight)
            elif status == PYTHON:  # an event the Python path rejects (or, if E changed, applies)
                super()._apply_graph(batch, rejected, i, i + 1)
                i += 1
                g = plan.simple_graph()
            if self.plan is not plan or g is None:
                self._apply_graph(batch, rejected, i)
                return

    # --- switching ----------------------------------------------------------------------------------

    def switch_to(self, name: str) -> None:
        """Rebuild plan ``name`` from the live relations (exact: Q is carried over, not recounted)."""
        if name not in self.plans:
            known = ", ".join(self.plans)
            raise EngineError(f"auto has no plan {name!r} in {self.mode} mode (plans: {known})")
        old = self.plan
        self._rows_moved |= self._stored_parts  # heavy rows of the old plan stop being heavy ...
        self._rows_moved |= getattr(old, "_rows_moved", set())
        plan, work = build_plan(name, self.mode, old, old.q)
        self._install(name, plan)
        self._rows_moved |= plan._rows_moved  # ... and the new plan's heavy rows start
        plan._rows_moved.clear()
        self.switch_work_total += work
        self.switches += 1
        self._fixed_stats = self._plan_gauges()
        self.observed = 0
        self.regret = dict.fromkeys(self.plans, 0)
        self._join_cache = {}

    def _install(self, name: str, plan: TriangleEngine) -> None:
        """Make ``plan`` the current one; it counts work and tuple updates on from the old plan's."""
        if plan is not self.plan:
            plan.work = self.work
            plan.tuple_updates = self.plan.tuple_updates
            self.plan = plan
        self.plan_name = name
        self._fixed_stats = self._plan_gauges()
        self._plan_stats = plan._stats_extra
        self._plan_update = plan._update  # read per update, so bound once (auto's own wrapper reads it)
        self._served = _served(name)
        kind = _kind(name)  # the current plan's fixed cost per update (a view plan's on the others)
        c = self.costs
        self._spent_fixed = c.first_order if kind == FO else c.ivm_eps if kind == EPS else c.view_other
        self._regret_floor = c.switch_percent * c.rebuild_fixed
        self._candidates = [(p, _kind(p), _served(p)) for p in self.plans if p != name]
        self._coldeg = []
        if isinstance(plan, IvmEpsEngine) and not self.graph:
            self._coldeg = []
            for k in range(3):
                deg: dict[Any, int] = {}
                for _x, row in plan._rows(k):
                    for v in row:
                        deg[v] = deg.get(v, 0) + 1
                self._coldeg.append(deg)

    # --- the TriangleEngine hooks, delegated to the current plan ----------------------------------

    def _mult(self, k: int, x: Any, y: Any) -> int:
        return self.plan._mult(k, x, y)

    def _build(self, fwd: list[Index]) -> None:
        plan = new_plan(FIRST_ORDER, self.mode)
        plan._build(fwd)
        self._install(FIRST_ORDER, plan)

    def _relation_sizes(self) -> list[int]:
        return self.plan._relation_sizes()

    def _plan_gauges(self) -> dict[str, int]:
        """The stats that change only with a switch: built then, not on every read of the result."""
        out = {f"plan_{p}": int(p == self.plan_name) for p in self.plans}
        out["plan_switches"] = self.switches
        out["switch_work_total"] = self.switch_work_total
        return out

    def _stats_extra(self) -> dict[str, int]:
        """Built from scratch: what ``stats_exact`` below (gauges kept per switch) must equal."""
        return {**self._plan_gauges(), **self.plan._stats_extra()}

    def stats_exact(self) -> dict[str, int]:
        """The base class's stats (same names, same order), reading the plan's counters directly and the
        gauges kept per switch: the result is read after every batch, and the properties above would
        add a call per counter."""
        plan = self.plan
        out = {
            "events": self.events,
            "tuple_updates": plan.tuple_updates,
            "work_last": self.work_last,
            "work_total": self.work_total,
            "size": plan.size,
        }
        for key, n in zip(self._size_keys, plan._relation_sizes(), strict=True):
            out[key] = n
        out.update(self._fixed_stats)
        inner = self._plan_stats()
        if inner:
            out.update(inner)  # the plans' gauge names never start with "plan_"
        return out

    def result(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.stats_exact()
        stats["plan"] = self.plan_name
        stats["plan_reason"] = self.reason
        q = self.plan.q
        if self.graph:
            return {"count": json_int(q), "triangles": json_int(q // 6), "stats": stats}
        return {"count": json_int(q), "stats": stats}

    def _decision(self) -> dict[str, Any]:
        return {
            "plan": self.plan_name,
            "reason": self.reason,
            "regret": [self.regret[name] for name in self.plans],
            "observed": self.observed,
            "skip": self._skip,
            "join_sizes": {name: list(v) for name, v in sorted(self._join_cache.items())},
            "plan_counters": {name: getattr(self.plan, name) for name in self.plan._COUNTERS},
        }

    def _set_decision(self, d: Mapping[str, Any]) -> None:
        self.reason = d["reason"]
        self.regret = dict(zip(self.plans, d["regret"], strict=True))
        self.observed = d["observed"]
        self._skip = d["skip"]
        self._join_cache = {name: (v[0], v[1]) for name, v in d["join_sizes"].items()}

    def _dump_relations(self) -> dict[str, Any]:
        return {"decision": self._decision(), "plan": orjson.loads(self.plan.snapshot())}

    def _load_relations(self, data: Mapping[str, Any]) -> None:
        name = data["decision"]["plan"]
        plan = new_plan(name, self.mode)
        plan.restore(orjson.dumps(data["plan"]))
        self._install(name, plan)
        self._set_decision(data["decision"])

    def _rows(self, k: int) -> Iterable[tuple[Any, dict[Any, int]]]:
        return self.plan._rows(k)

    def _mirror_edges(self) -> list[tuple[Any, Any]] | None:
        return self.plan._mirror_edges()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        entries = list(entries)
        found = [v for m, key, v in entries if m == "s" and key == b"auto"]
        if len(found) != 1:
            raise EngineError("auto state entries lack the plan decision ('s' entry 'auto')")
        self._pending = orjson.loads(found[0])
        super().restore_entries(entries)

    def _load_tuples(self, fwd: list[Index], heavy: set[tuple[int, Any]]) -> None:
        d = self._pending
        if d is None:
            raise EngineError("auto restores its plan from the 'auto' state entry")
        plan = new_plan(d["plan"], self.mode)
        plan._load_tuples(fwd, heavy)
        for name, v in d["plan_counters"].items():
            setattr(plan, name, v)
        plan.work = plan.work_total
        self._install(d["plan"], plan)
        self._set_decision(d)

    def _after_restore(self) -> None:
        plan = self.plan
        plan.work = self.work
        if self._pending is not None:  # from entries; a plan restored from its snapshot is complete
            plan._after_restore()
            self._pending = None
        self._fixed_stats = self._plan_gauges()  # the switch counters were restored after the plan

    def pending_changes(self) -> int:
        return super().pending_changes() + len(getattr(self.plan, "_rows_moved", ()))

    def _forget_changes(self) -> None:
        super()._forget_changes()
        moved = getattr(self.plan, "_rows_moved", None)
        if moved:
            moved.clear()

    def changed_entries(self) -> list[EntryChange]:
        moved = getattr(self.plan, "_rows_moved", None)
        if moved:
            self._rows_moved |= moved
            moved.clear()
        return super().changed_entries()

    def all_entries(self) -> Iterator[Entry]:
        moved = getattr(self.plan, "_rows_moved", None)
        if moved:
            moved.clear()
        return super().all_entries()

    def _scalar_entries(self) -> list[Entry]:
        return [*super()._scalar_entries(), ("s", b"auto", orjson.dumps(self._decision()))]

    def _has_parts(self) -> bool:
        return True  # the IVM^ε plan's heavy rows are state; under the other plans there are none

    def _is_heavy(self, k: int, x: Any) -> bool:
        return self.plan._is_heavy(k, x)

    def _heavy_rows(self) -> set[tuple[int, Any]]:
        return self.plan._heavy_rows()

    def max_regret_share(self) -> float:
        """The largest regret as a share of the plan-independent part of a rebuild (benchmarks watch
        it to tell a settled plan from one about to switch)."""
        c = self.costs
        floor = c.switch_percent * c.rebuild_fixed / 100
        return max(self.regret.values()) / floor if floor else 0.0

    def check_invariants(self) -> None:
        self.plan.check_invariants()  # type: ignore[attr-defined]
        if self.plan.work != self.work:
            raise AssertionError("auto's work counter differs from its plan's")


__all__ = ["DEFAULT_COSTS", "REL_NAMES", "AutoEngine", "CostModel", "plan_names", "view_plan"]
