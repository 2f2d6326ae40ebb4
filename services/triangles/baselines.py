"""The baselines over unpartitioned relations, behind the same Engine protocol.

Section numbers (§) refer to docs/triangles/algorithm.md.

- ``first-order`` (§4.2): classical IVM, Q += m·Σ_c S(b,c)·T(c,a) over the smaller row; the flag
  ``always_iterate_s`` always walks the S row (the textbook form, the paper's worst-case baseline).
- ``factorized`` (§4.3): F-IVM with only V_ST = Σ_c S(b,c)·T(c,a) materialized: R updates are one lookup.
- ``recursive`` (§4.4): DBToaster-style, all three full views W_RS, W_ST, W_TR.
- ``recompute`` (§4.5): relations only; Q recomputed by the O(N^{3/2}) plan once per ``apply`` call.

Graph mode: E plays all three roles, so every view above is the same wedge view W(x, z) = Σ_y E(x,y)E(y,z)
and ``factorized`` and ``recursive`` coincide (one view, maintained for every update). An update δ at
(x, y) adds 3·m·Σ_c E(y,c)E(c,x), plus 3m²E(x,x) + m³ when x = y (§2.11).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ivmstream.sdk import Rejection, UpdateEvent
from ivmstream.services.triangles import simple_graph
from ivmstream.services.triangles.base import (
    Index,
    TriangleEngine,
    bump,
    count_triangles,
    dump_index,
    load_index,
    support,
    transpose,
)
from ivmstream.services.triangles.kernels import dot
from ivmstream.services.triangles.simple_graph import PYTHON

View = dict[tuple[Any, Any], int]
_EMPTY: dict[Any, int] = {}


class _FullRelations(TriangleEngine):
    """Relations with an index on each variable: fwd[k][x][y] and bwd[k][y][x]."""

    def __init__(self, mode: str = "graph") -> None:
        super().__init__(mode)
        self.fwd = [{} for _ in range(self.nrel)]
        self.bwd = [{} for _ in range(self.nrel)]
        self.rsize = [0] * self.nrel

    def _base(self, k: int, x: Any, y: Any, m: int) -> None:
        ds = bump(self.fwd[k], x, y, m)
        bump(self.bwd[k], y, x, m)
        self.rsize[k] += ds
        self.size += ds

    def _self_loop_terms(self, x: Any, m: int) -> int:
        """3m²E(x,x) + m³ for a self-join update at (x, x), with the pre-update E(x,x)."""
        e = self.fwd[0].get(x, {}).get(x, 0)
        return 3 * m * m * e + m * m * m

    def _mult(self, k: int, x: Any, y: Any) -> int:
        row = self.fwd[k].get(x)
        return 0 if row is None else row.get(y, 0)

    def _relation_sizes(self) -> list[int]:
        return list(self.rsize)

    def _all_fwd(self) -> list[dict]:
        return self.fwd * 3 if self.graph else self.fwd

    def _all_bwd(self) -> list[dict]:
        return self.bwd * 3 if self.graph else self.bwd

    def _build(self, fwd: list[dict]) -> None:
        self.fwd = fwd
        self.bwd = [transpose(f) for f in fwd]
        self.rsize = [support(f) for f in fwd]
        self.size = sum(self.rsize)
        self.q, _ = count_triangles(self._all_fwd(), self._all_bwd())
        self._rebuild_derived()

    def _rebuild_derived(self) -> None:
        """Views (if any) are functions of the relations: rebuilt after BUILD and restore."""

    def _dump_relations(self) -> dict[str, Any]:
        return {self._rel_name(k): dump_index(self.fwd[k]) for k in range(self.nrel)}

    def _load_relations(self, data: Mapping[str, Any]) -> None:
        self._load_tuples([load_index(data[self._rel_name(k)]) for k in range(self.nrel)], set())

    def _rows(self, k: int) -> Iterable[tuple[Any, dict[Any, int]]]:
        return self.fwd[k].items()

    def _load_tuples(self, fwd: list[Index], heavy: set[tuple[int, Any]]) -> None:
        self.fwd = fwd
        self.bwd = [transpose(f) for f in self.fwd]
        self.rsize = [support(f) for f in self.fwd]
        self.size = sum(self.rsize)
        self._rebuild_derived()

    def check_invariants(self) -> None:
        """Indexes mirror each other, sizes are exact, no zeros, Q equals the recomputation."""
        for k in range(self.nrel):
            name = self._rel_name(k)
            if transpose(self.fwd[k]) != self.bwd[k]:
                raise AssertionError(f"{name}: the second-variable index does not mirror the relation")
            if support(self.fwd[k]) != self.rsize[k]:
                raise AssertionError(f"{name}: size counter {self.rsize[k]} is wrong")
            if any(not row or 0 in row.values() for row in self.fwd[k].values()):
                raise AssertionError(f"{name}: empty row or zero multiplicity stored")
        if sum(self.rsize) != self.size:
            raise AssertionError("|D| counter differs from the relation sizes")
        q, _ = count_triangles(self._all_fwd(), self._all_bwd())
        if q != self.q:
            raise AssertionError(f"Q = {self.q} but recomputation gives {q}")


class FirstOrderEngine(_FullRelations):
    """Classical first-order IVM (§4.2): one intersection per update, no views."""

    strategy = "first-order"

    # Graph mode: the compiled mirror of E (simple_graph.py), None until built, False while E is not a
    # simple graph. While ``_stale``, batches have run on the mirror only: the dict indexes are rewritten
    # from it when read (the ``fwd``/``bwd`` properties) and the mirror is dropped by an ``_update``.
    _fast: Any = None
    _stale = False

    def __init__(self, mode: str = "graph", always_iterate_s: bool = False) -> None:
        super().__init__(mode)
        self.always_iterate_s = always_iterate_s

    @property  # type: ignore[override]
    def fwd(self) -> list[Index]:
        if self._stale:
            self._catch_up()
        return self._fwd

    @fwd.setter
    def fwd(self, value: list[Index]) -> None:
        self._fwd = value

    @property  # type: ignore[override]
    def bwd(self) -> list[Index]:
        if self._stale:
            self._catch_up()
        return self._bwd

    @bwd.setter
    def bwd(self, value: list[Index]) -> None:
        self._bwd = value

    def _catch_up(self) -> None:
        """Rewrite the dict indexes from the mirror (their rows in the mirror's order)."""
        self._fast.materialize()
        self._stale = False

    def _mult(self, k: int, x: Any, y: Any) -> int:
        if self._stale:
            return 1 if self._fast.has_edge(x, y) else 0
        return super()._mult(k, x, y)

    def _mirror_edges(self) -> list[tuple[Any, Any]] | None:
        if not self._stale:
            return None
        try:
            edges: list[tuple[Any, Any]] = self._fast.edges()
        except TypeError:  # node ids the mirror cannot order as _edge does: scan the dicts instead
            return None
        return edges

    def row_col(self, k: int, x: Any, y: Any) -> tuple[int, int]:
        """|next(y, ·)| and |prev(·, x)|, the two rows an update to relation k at (x, y) intersects."""
        if self._stale:
            return self._fast.degree(y), self._fast.degree(x)
        return len(self._fwd[self._nxt[k]].get(y, ())), len(self._bwd[self._prv[k]].get(x, ()))

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        if self._fast:  # the Python path changes the dicts: catch them up, then drop the mirror
            if self._stale:
                self._catch_up()
            self._fast = None
        row = self._fwd[self._nxt[k]].get(y)  # S(y, ·) for an update to R(x, y)
        col = self._bwd[self._prv[k]].get(x)  # T(·, x)
        d = 0
        if self.always_iterate_s:
            if row is not None:
                self.work += len(row)
                d = dot(row, _EMPTY if col is None else col)
        elif row is not None and col is not None:
            if len(row) <= len(col):
                self.work += len(row)
                d = dot(row, col)
            else:
                self.work += len(col)
                d = dot(col, row)
        if self.graph:
            self.q += 3 * m * d + (self._self_loop_terms(x, m) if x == y else 0)
        else:
            self.q += m * d
        self._base(k, x, y, m)
        self.tuple_updates += 1

    def _base(self, k: int, x: Any, y: Any, m: int) -> None:
        # only ``_update`` calls it, once the dicts are current: they are read without the properties
        ds = bump(self._fwd[k], x, y, m)
        bump(self._bwd[k], y, x, m)
        self.rsize[k] += ds
        self.size += ds

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "always_iterate_s": self.always_iterate_s}

    def _rebuild_derived(self) -> None:
        # new relations: the mirror is rebuilt from them when a batch needs it
        self._fast = None
        self._stale = False

    def simple_graph(self) -> Any:
        """The compiled mirror of E for a batch of graph events, or None (the Python path runs)."""
        g = self._fast
        if g is None or (g is not False and (g.fwd is not self._fwd[0] or g.tuples != self.rsize[0])):
            if self._stale:  # pragma: no cover - the indexes were replaced without _rebuild_derived
                raise AssertionError("the mirror of E no longer matches the engine's indexes")
            usable = self.graph and not self.always_iterate_s
            g = self._fast = (simple_graph.mirror(self._fwd[0], self._bwd[0]) if usable else None) or False
        return g or None

    def _apply_graph(
        self,
        events: Sequence[UpdateEvent],
        rejected: list[Rejection],
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        g = self.simple_graph() if stop is None else None
        if g is None:
            super()._apply_graph(events, rejected, start, stop)
            return
        batch = events if events.__class__ is list else list(events)
        changes = None if self._all_changed else self._edge_changes
        i, n = start, len(batch)
        while i < n:
            i, status, dq, dsize, dwork, devents, work_last, *_ = g.run(batch, i, changes, 0, 0, 0)
            self.absorb(self, dq, dsize, dwork, devents, work_last)
            if status == PYTHON:  # an event the Python path rejects (or, if E changed, applies)
                super()._apply_graph(batch, rejected, i, i + 1)
                i += 1
                g = self.simple_graph()
                if g is None:
                    super()._apply_graph(batch, rejected, i)
                    return

    def absorb(
        self, owner: TriangleEngine, dq: int, dsize: int, dwork: int, devents: int, work_last: int
    ) -> None:
        """The counters of ``devents`` graph events the mirror applied: Q, sizes, work and tuple updates
        here, events and the last event's work on ``owner`` (this engine or ``auto`` running it)."""
        if devents:
            if not self._stale:  # the dicts fall behind: empty them rather than keep a stale copy
                self._stale = True
                self._fwd[0].clear()
                self._bwd[0].clear()
            self.q += dq
            self.size += dsize
            self.rsize[0] += dsize
            self.work += dwork
            self.tuple_updates += 2 * devents
            owner.events += devents
            owner.work_last = work_last
            if owner is not self:
                owner.work += dwork


class ViewEngine(_FullRelations):
    """Full-relation views W_k(x, z) = Σ_y K_k(x, y)·K_{k+1}(y, z) for k in ``views`` (§4.3, §4.4).

    An update to relation k reads W_{k+1}(y, x) when materialized (else intersects, like first-order)
    and maintains W_k(x, ·) from row y of relation k+1 and W_{k+2}(·, y) from column x of relation k+2.
    """

    strategy = "recursive"

    def __init__(self, mode: str = "graph", views: tuple[int, ...] = (0, 1, 2)) -> None:
        super().__init__(mode)
        self.materialized = (True,) if self.graph else tuple(k in views for k in range(3))
        self.views: list[View] = [{} for _ in range(self.nrel)]

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        nxt, prv = self._nxt[k], self._prv[k]
        row = self.fwd[nxt].get(y)
        col = self.bwd[prv].get(x)
        work = 0
        if self.materialized[nxt]:
            d = self.views[nxt].get((y, x), 0)
            work += 1
        else:
            d = 0
            if row is not None and col is not None:
                if len(row) <= len(col):
                    work += len(row)
                    for c, a in row.items():
                        b = col.get(c)
                        if b is not None:
                            d += a * b
                else:
                    work += len(col)
                    for c, b in col.items():
                        a = row.get(c)
                        if a is not None:
                            d += a * b
        if self.graph:
            self.q += 3 * m * d + (self._self_loop_terms(x, m) if x == y else 0)
        else:
            self.q += m * d
        if self.materialized[k] and row is not None:
            view = self.views[k]
            work += len(row)
            for c, a in row.items():
                key = (x, c)
                nv = view.get(key, 0) + m * a
                if nv:
                    view[key] = nv
                else:
                    del view[key]
        if self.materialized[prv] and col is not None:
            view = self.views[prv]
            work += len(col)
            for c, b in col.items():
                key = (c, y)
                nv = view.get(key, 0) + b * m
                if nv:
                    view[key] = nv
                else:
                    del view[key]
        if self.graph and x == y:  # δ(x,y)·δ(y,z) term of the wedge view
            view = self.views[0]
            key = (x, x)
            nv = view.get(key, 0) + m * m
            if nv:
                view[key] = nv
            else:
                del view[key]
        self.work += work
        self._base(k, x, y, m)
        self.tuple_updates += 1

    def _rebuild_derived(self) -> None:
        for k in range(self.nrel):
            self.views[k] = _full_view(self.fwd[k], self.fwd[self._nxt[k]]) if self.materialized[k] else {}

    def _stats_extra(self) -> dict[str, int]:
        if self.graph:
            out = {"view_W": len(self.views[0])}
        else:
            out = {f"view_{n}": len(v) for n, v in zip(("RS", "ST", "TR"), self.views, strict=True)}
        out["view_entries"] = sum(len(v) for v in self.views)
        return out

    def check_invariants(self) -> None:
        super().check_invariants()
        for k in range(self.nrel):
            expect = _full_view(self.fwd[k], self.fwd[self._nxt[k]]) if self.materialized[k] else {}
            if self.views[k] != expect:
                raise AssertionError(f"view {k} differs from its recomputation")


class FactorizedEngine(ViewEngine):
    """F-IVM with only V_ST (§4.3): R updates are a lookup, S and T updates intersect and maintain V_ST."""

    strategy = "factorized"

    def __init__(self, mode: str = "graph") -> None:
        super().__init__(mode, views=(1,))


class RecursiveEngine(ViewEngine):
    """DBToaster-style recursive IVM (§4.4): all three full views, O(1) Q delta, O(N) maintenance."""

    strategy = "recursive"

    def __init__(self, mode: str = "graph") -> None:
        super().__init__(mode, views=(0, 1, 2))


class RecomputeEngine(_FullRelations):
    """Naive recomputation (§4.5): keep the relations, recount Q once per ``apply`` call that changed them.

    Its work counter adds the recount's loop iterations; ``work_last`` is the last recount's work."""

    strategy = "recompute"

    def __init__(self, mode: str = "graph") -> None:
        super().__init__(mode)
        self._dirty = False

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        self._base(k, x, y, m)
        self.tuple_updates += 1
        self._dirty = True

    def _finish_batch(self) -> None:
        if self._dirty:
            self.q, work = count_triangles(self._all_fwd(), self._all_bwd())
            self.work += work
            self.work_last = work
            self._dirty = False


def _full_view(left: dict, right: dict) -> View:
    view: View = {}
    for x, row in left.items():
        for y, a in row.items():
            r2 = right.get(y)
            if r2 is None:
                continue
            for z, b in r2.items():
                key = (x, z)
                view[key] = view.get(key, 0) + a * b
    return {key: v for key, v in view.items() if v}
