"""IVM^ε: heavy/light partitions, three views, minor and major rebalancing, O(1) answer.

Section numbers (§) refer to docs/triangles/algorithm.md, which explains the algorithm (§2).

State Z = (ε, N, P, V). Relation k is split on its first variable into a heavy part (indexed by both
variables; the second-variable index serves updates to the next relation) and a light part (first
variable only). View k is V_k(x, z) = Σ_y K_h(x, y)·Next_l(y, z): V_RS, V_ST, V_TR; graph mode has one
relation E and one view V(a, c) = Σ_b E_h(a, b)·E_l(b, c) (§2.11), by aliasing the three roles.

Views are flat dicts keyed (x, z): they are only ever probed and bumped per entry, and ``len`` is
their size. Thresholds come from ``thresholds.py`` (exact integers, cached per N).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.triangles.base import (
    EDGE_RELATION,
    REL_NAMES,
    Hook,
    Index,
    TriangleEngine,
    bump,
    count_triangles,
    dump_index,
    load_index,
    support,
    transpose,
)
from ivmstream.services.triangles.kernels import dot, heavy_pass, light_pass, probe_dot
from ivmstream.services.triangles.thresholds import Thresholds, parse_epsilon, thresholds

View = dict[tuple[Any, Any], int]


def parse_epsilons(epsilon: Any, graph: bool) -> tuple[Fraction, ...]:
    """One ε per relation: a single rational for all, or (relations mode) a mapping R/S/T -> rational."""
    if isinstance(epsilon, Mapping):
        if graph:
            raise EngineError("graph mode has one relation: epsilon must be a single rational")
        keys = set(epsilon)
        if keys != set(REL_NAMES):
            missing = sorted(set(REL_NAMES) - keys)
            extra = sorted(map(str, keys - set(REL_NAMES)))
            raise EngineError(
                "per-relation epsilon needs exactly the keys R, S, T"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unknown {', '.join(extra)}" if extra else "")
            )
        try:
            return tuple(parse_epsilon(epsilon[name]) for name in REL_NAMES)
        except ValueError as exc:
            raise EngineError(str(exc)) from None
    try:
        eps = parse_epsilon(epsilon)
    except ValueError as exc:
        raise EngineError(str(exc)) from None
    return (eps,) if graph else (eps, eps, eps)


class IvmEpsEngine(TriangleEngine):
    """IVM^ε for R(a,b)·S(b,c)·T(c,a) (relations mode) or the symmetric edge relation (graph mode).

    ``epsilon``: a rational in [0, 1] ("1/2", 0.25, Fraction) or, in relations mode, a mapping
    {"R": ..., "S": ..., "T": ...} (per-relation ε, §4.1). ``on_rebalance``: optional callback
    receiving one dict per minor/major rebalancing (tests use it for the I11/I12 accounting).
    """

    strategy = "ivm-eps"
    # Performance only: the base class's 12 attributes stay in the instance dict, these 21 go to slots.
    # CPython 3.11 keeps at most 30 attributes in an instance's inline values; with all 33 in the dict,
    # ``self.x`` and ``self.method()`` on the per-update path lost their specialized fast paths.
    __slots__ = (
        "_eps_zero",
        "build_work",
        "epoch_updates",
        "eps",
        "hb",
        "hf",
        "hsize",
        "lf",
        "lsize",
        "major_down",
        "major_up",
        "major_work_total",
        "minor_down",
        "minor_tuples_moved",
        "minor_up",
        "minor_work_total",
        "n",
        "on_rebalance",
        "rebalance_work_last",
        "thr",
        "views",
    )
    _COUNTERS = (
        *TriangleEngine._COUNTERS,
        "n",
        "epoch_updates",
        "minor_up",
        "minor_down",
        "minor_tuples_moved",
        "minor_work_total",
        "major_up",
        "major_down",
        "major_work_total",
        "rebalance_work_last",
        "build_work",
    )

    def __init__(self, mode: str = "graph", epsilon: Any = "1/2", *, on_rebalance: Hook | None = None):
        super().__init__(mode)
        self.eps = parse_epsilons(epsilon, self.graph)
        self._eps_zero = tuple(e == 0 for e in self.eps)
        self.on_rebalance = on_rebalance
        nrel = self.nrel
        self.hf: list[Index] = [{} for _ in range(nrel)]  # heavy part by first variable
        self.hb: list[Index] = [{} for _ in range(nrel)]  # heavy part by second variable
        self.lf: list[Index] = [{} for _ in range(nrel)]  # light part by first variable
        self.hsize = [0] * nrel
        self.lsize = [0] * nrel
        self.views: list[View] = [{} for _ in range(nrel)]
        self.n = 1  # threshold base N; 2|D₀|+1 = 1 for the empty database
        self.thr: list[Thresholds] = [thresholds(1, e) for e in self.eps]
        self.epoch_updates = 0  # tuple updates since the last major rebalancing or BUILD
        self.minor_up = 0
        self.minor_down = 0
        self.minor_tuples_moved = 0
        self.minor_work_total = 0
        self.major_up = 0
        self.major_down = 0
        self.major_work_total = 0
        self.rebalance_work_last = 0
        self.build_work = 0

    # --- routing and rebalancing triggers (§2.7) ---------------------------------------------------

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        heavy = x in self.hf[k] or self._eps_zero[k]  # new values start light unless ε_K = 0
        self._apply_update(k, heavy, x, y, m)
        self.tuple_updates += 1
        self.epoch_updates += 1
        size = self.size
        n = self.n
        if size >= n:  # |D| moves by at most 1 per update, so this is |D| == N
            self._major(2 * n)
        elif size < n // 4:
            self._major(n // 2 - 1)
        else:
            t = self.thr[k]  # (strict, up, down): indexed, a NamedTuple field read is a slower lookup
            row = self.lf[k].get(x)
            if row is not None:
                if len(row) >= t[1]:
                    self._minor(k, x, True)
            else:
                row = self.hf[k].get(x)
                if row is not None and len(row) < t[2]:
                    self._minor(k, x, False)

    # --- delta rules of one update (§2.6; graph mode §2.11) -----------------------------------------

    def _apply_update(self, k: int, heavy: bool, x: Any, y: Any, m: int) -> None:
        """Update part K_h or K_l of relation k at (x, y) by m; every delta reads the pre-update state.

        Order: the hl view lookup first (in graph mode there is one view, and at x = y its maintenance
        below can move the very entry V(x, x) that lookup reads), then the other deltas and the view
        maintenance, the part itself last. No delta reads a view after that lookup, so a delta walk and
        the view maintenance that walks the same row share one pass (``light_pass``, ``heavy_pass``)."""
        nxt = self._nxt[k]
        prv = self._prv[k]
        # hl: V_{next}(y, x) = Σ_c L_h(y,c)·P_l(c,x), one lookup (the 1 work unit).
        d = self.views[nxt].get((y, x), 0)
        work = 1
        col = self.hb[prv].get(x)  # P_h(·, x)
        lrow = self.lf[nxt].get(y)  # L_l(y, ·)
        if col is not None:
            ncol = len(col)
            # hh: Σ_c L_h(y,c)·P_h(c,x) and lh: Σ_c L_l(y,c)·P_h(c,x), each over the smaller of its two
            # rows. ``probe`` is a row whose walk over col is left to the pass below.
            probe = None
            hrow = self.hf[nxt].get(y)  # L_h(y, ·)
            if hrow is not None:
                if len(hrow) <= ncol:
                    work += len(hrow)
                    d += dot(hrow, col)
                else:
                    work += ncol
                    probe = hrow
            if lrow is not None:
                if len(lrow) <= ncol:
                    work += len(lrow)
                    d += dot(lrow, col)
                else:
                    work += ncol
                    if probe is None:
                        probe = lrow
                    else:
                        d += dot(col, lrow)
            if heavy:
                if probe is not None:
                    d += dot(col, probe)
            else:
                # A light update extends V_{prev}(·, y) by the heavy column P_h(·, x).
                work += ncol
                d += light_pass(self.views[prv], col, y, m, probe)
        # ll: Σ_c L_l(y,c)·P_l(c,x) over the light row (< 1.5·N^ε entries), probing P_l by its first
        # variable; a heavy update also extends V_k(x, ·) by that light row L_l(y, ·).
        if lrow is not None:
            nl = len(lrow)
            if heavy:
                work += 2 * nl
                d += heavy_pass(self.views[k], x, lrow, m, self.lf[prv])
            else:
                work += nl
                d += probe_dot(lrow, self.lf[prv], x)
        if self.graph:
            dq = 3 * m * d
            if x == y:  # δ·δ·E and δ·δ·δ terms of the self-join (pre-update E(x,x))
                e = self.hf[0].get(x, {}).get(x, 0) + self.lf[0].get(x, {}).get(x, 0)
                dq += 3 * m * m * e + m * m * m
            self.q += dq
        else:
            self.q += m * d
        # The part itself, last.
        if heavy:
            ds = bump(self.hf[k], x, y, m)
            bump(self.hb[k], y, x, m)
            self.hsize[k] += ds
        else:
            ds = bump(self.lf[k], x, y, m)
            self.lsize[k] += ds
        self.size += ds
        self.work += work

    # --- rebalancing (§2.8, §2.9) ------------------------------------------------------------------

    def _minor(self, k: int, x: Any, to_heavy: bool) -> None:
        """Move all tuples with first variable x between the parts of relation k (§2.8)."""
        src = self.lf[k] if to_heavy else self.hf[k]
        moved = list(src[x].items())  # snapshot: the row shrinks while we move it
        q0 = self.q
        w0 = self.work
        apply_update = self._apply_update
        for y, m in moved:
            apply_update(k, not to_heavy, x, y, -m)
            apply_update(k, to_heavy, x, y, m)
        self._rows_moved.add((k, x))  # the tuples keep their multiplicities; only the part is new
        work = self.work - w0
        self.work = w0
        self.minor_work_total += work
        self.rebalance_work_last = work
        self.minor_tuples_moved += len(moved)
        if to_heavy:
            self.minor_up += 1
        else:
            self.minor_down += 1
        if self.on_rebalance is not None:
            self.on_rebalance(
                {
                    "kind": "minor",
                    "relation": self._rel_name(k),
                    "value": x,
                    "to": "h" if to_heavy else "l",
                    "moved": len(moved),
                    "n": self.n,
                    "q_before": q0,
                    "q_after": self.q,
                    "thresholds": self.thr[k],
                }
            )

    def _major(self, new_n: int) -> None:
        """N changed: strictly repartition every relation and recompute the views (§2.9); Q stays."""
        old_n = self.n
        q0 = self.q
        work = self._repartition(new_n)
        self.major_work_total += work
        self.rebalance_work_last = work
        if new_n > old_n:
            self.major_up += 1
        else:
            self.major_down += 1
        self.epoch_updates = 0
        if self.on_rebalance is not None:
            self.on_rebalance(
                {
                    "kind": "major",
                    "n_before": old_n,
                    "n": new_n,
                    "size": self.size,
                    "q_before": q0,
                    "q_after": self.q,
                }
            )

    def _repartition(self, n: int) -> int:
        """STRICT_PARTITION of every relation at θ_strict(n) plus the views; returns the work done."""
        self.n = n
        self.thr = [thresholds(n, e) for e in self.eps]
        work = 0
        for k in range(self.nrel):
            theta = self.thr[k].strict
            hf: Index = {}
            lf: Index = {}
            hs = ls = 0
            self._rows_moved.update((k, x) for x in self.hf[k])  # heavy before or after: maybe moved
            for part in (self.hf[k], self.lf[k]):
                for x, row in part.items():
                    if len(row) >= theta:
                        hf[x] = row
                        hs += len(row)
                    else:
                        lf[x] = row
                        ls += len(row)
            self.hf[k], self.lf[k], self.hb[k] = hf, lf, transpose(hf)
            self.hsize[k], self.lsize[k] = hs, ls
            work += 2 * hs + ls
            self._rows_moved.update((k, x) for x in hf)
        return work + self._rebuild_views()

    def _rebuild_views(self) -> int:
        work = 0
        for k in range(self.nrel):
            self.views[k], w = _join_view(self.hf[k], self.lf[self._nxt[k]])
            work += w
        return work

    def _build(self, fwd: list[Index]) -> None:
        """BUILD (§2.5): N = 2|D₀|+1, strict partitions, views, and Q by the O(N^{3/2}) plan."""
        for k in range(self.nrel):
            self.hf[k], self.hb[k], self.lf[k] = {}, {}, fwd[k]
            self.lsize[k] = support(fwd[k])
            self.hsize[k] = 0
        self.size = sum(self.lsize)
        work = self._repartition(2 * self.size + 1)
        full = fwd if not self.graph else [fwd[0]] * 3
        bwd = [transpose(f) for f in fwd] if not self.graph else [transpose(fwd[0])] * 3
        self.q, w = count_triangles(full, bwd)
        self.build_work = work + w
        self.epoch_updates = 0

    # --- lookups, stats, snapshot ------------------------------------------------------------------

    def _mult(self, k: int, x: Any, y: Any) -> int:
        row = self.hf[k].get(x) or self.lf[k].get(x)
        return 0 if row is None else row.get(y, 0)

    def _relation_sizes(self) -> list[int]:
        return [h + le for h, le in zip(self.hsize, self.lsize, strict=True)]

    def _stats_extra(self) -> dict[str, int]:
        out = {
            "N": self.n,
            "minor_rebalances": self.minor_up + self.minor_down,
            "minor_up": self.minor_up,
            "minor_down": self.minor_down,
            "minor_tuples_moved": self.minor_tuples_moved,
            "minor_work_total": self.minor_work_total,
            "major_rebalances": self.major_up + self.major_down,
            "major_up": self.major_up,
            "major_down": self.major_down,
            "major_work_total": self.major_work_total,
            "rebalance_work_last": self.rebalance_work_last,
            "build_work": self.build_work,
        }
        for k in range(self.nrel):
            name = self._rel_name(k)
            t = self.thr[k]
            out[f"theta_strict_{name}"] = t.strict
            out[f"theta_up_{name}"] = t.up
            out[f"theta_down_{name}"] = t.down
            out[f"heavy_values_{name}"] = len(self.hf[k])
            out[f"part_{name}_h"] = self.hsize[k]
            out[f"part_{name}_l"] = self.lsize[k]
        for k in range(self.nrel):
            out[f"view_{self._view_name(k)}"] = len(self.views[k])
        out["view_entries"] = sum(len(v) for v in self.views)
        return out

    def _config(self) -> dict[str, Any]:
        eps = [str(e) for e in self.eps]
        return {"mode": self.mode, "strategy": self.strategy, "epsilon": eps}

    def _dump_relations(self) -> dict[str, Any]:
        return {
            self._rel_name(k): {"h": dump_index(self.hf[k]), "l": dump_index(self.lf[k])}
            for k in range(self.nrel)
        }

    def _load_relations(self, data: Mapping[str, Any]) -> None:
        """Parts as stored; hb, sizes, thresholds and views are functions of them and of N."""
        for k in range(self.nrel):
            part = data[self._rel_name(k)]
            self.hf[k] = load_index(part["h"])
            self.lf[k] = load_index(part["l"])
            self.hb[k] = transpose(self.hf[k])
            self.hsize[k] = support(self.hf[k])
            self.lsize[k] = support(self.lf[k])
        self.size = sum(self.hsize) + sum(self.lsize)

    def _after_restore(self) -> None:
        self.thr = [thresholds(self.n, e) for e in self.eps]
        self._rebuild_views()

    def _rows(self, k: int) -> Iterable[tuple[Any, dict[Any, int]]]:
        yield from self.hf[k].items()
        yield from self.lf[k].items()

    def _rows_born_heavy(self) -> bool:
        return any(self._eps_zero)

    def _has_parts(self) -> bool:
        return True  # the parts are state (§5.2): which rows are heavy is checkpointed

    def _is_heavy(self, k: int, x: Any) -> bool:
        return x in self.hf[k]

    def _heavy_rows(self) -> set[tuple[int, Any]]:
        return {(k, x) for k in range(self.nrel) for x in self.hf[k]}

    def _load_tuples(self, fwd: list[Index], heavy: set[tuple[int, Any]]) -> None:
        for k in range(self.nrel):
            hf: Index = {}
            lf: Index = {}
            for x, row in fwd[k].items():
                (hf if (k, x) in heavy else lf)[x] = row
            self.hf[k], self.lf[k], self.hb[k] = hf, lf, transpose(hf)
            self.hsize[k] = support(hf)
            self.lsize[k] = support(lf)
        self.size = sum(self.hsize) + sum(self.lsize)

    # --- invariants (§6.2) -------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert I1-I10 of §6.2 (I11/I12 need history: see the on_rebalance hook). O(N^{3/2}).

        Raises AssertionError naming the violated invariant. Never call it inside a rebalancing."""

        def fail(msg: str) -> None:
            raise AssertionError(msg)

        n, size = self.n, self.size
        for k in range(self.nrel):
            name = self._rel_name(k)
            hf, lf, hb = self.hf[k], self.lf[k], self.hb[k]
            t = self.thr[k]
            if t != thresholds(n, self.eps[k]):
                fail(f"{name}: cached thresholds {t} differ from thresholds({n}, {self.eps[k]})")
            # I8: no zero multiplicities or empty rows, the heavy index mirrors the part, sizes exact.
            for part, label in ((hf, "h"), (lf, "l"), (hb, "h by 2nd variable")):
                for x, row in part.items():
                    if not row:
                        fail(f"I8 {name}_{label}: empty row for {x!r}")
                    for y, m in row.items():
                        if not m:
                            fail(f"I8 {name}_{label}: zero multiplicity at ({x!r}, {y!r})")
            if transpose(hf) != hb:
                fail(f"I8 {name}_h: the second-variable index does not mirror the part")
            if support(hf) != self.hsize[k] or support(lf) != self.lsize[k]:
                fail(
                    f"I8 {name}: part sizes {self.hsize[k]}/{self.lsize[k]} != "
                    f"actual {support(hf)}/{support(lf)}"
                )
            # I1/I2: each tuple in one part, each first-variable value in one part.
            both = hf.keys() & lf.keys()
            if both:
                fail(f"I2 {name}: values {sorted(map(repr, both))[:5]} are in both parts")
            # I3/I4: loose bounds.
            for x, row in hf.items():
                if len(row) < t.down:
                    fail(f"I3 {name}_h: deg({x!r}) = {len(row)} < θ_down = {t.down} (N={n})")
            for x, row in lf.items():
                if len(row) >= t.up:
                    fail(f"I4 {name}_l: deg({x!r}) = {len(row)} ≥ θ_up = {t.up} (N={n})")
            # I9: extreme ε.
            if self.eps[k] == 0 and lf:
                fail(f"I9 {name}: ε=0 but the light part has {len(lf)} values")
            if self.eps[k] == 1 and hf:
                fail(f"I9 {name}: ε=1 but the heavy part has {len(hf)} values")
            # Strictness right after a major rebalancing or BUILD.
            if self.epoch_updates == 0:
                for x, row in hf.items():
                    if len(row) < t.strict:
                        fail(f"I5 {name}: not strict after a major rebalancing: deg_h({x!r}) < {t.strict}")
                for x, row in lf.items():
                    if len(row) >= t.strict:
                        fail(f"I5 {name}: not strict after a major rebalancing: deg_l({x!r}) ≥ {t.strict}")
        if sum(self.hsize) + sum(self.lsize) != size:
            fail(f"I8: |D| counter {size} != sum of part sizes")
        # I5: size invariant.
        if not n // 4 <= size < n:
            fail(f"I5: N//4 ≤ |D| < N violated: N={n}, |D|={size}")
        if self.epoch_updates == 0 and n not in (2 * size, 2 * size + 1, 2 * size + 2):
            fail(f"I5: right after a major rebalancing N={n} should be 2|D|..2|D|+2 (|D|={size})")
        # I6: views equal their recomputation, no zero entries.
        for k in range(self.nrel):
            expect, _ = _join_view(self.hf[k], self.lf[self._nxt[k]])
            view = self.views[k]
            if any(v == 0 for v in view.values()):
                fail(f"I6 V_{self._view_name(k)}: zero entry stored")
            if view != expect:
                diff = sorted(map(repr, set(view.items()) ^ set(expect.items())))[:5]
                fail(f"I6 V_{self._view_name(k)} differs from its recomputation: {diff}")
        # I10: the factorized configuration ε_S = 0, ε_T = 1 materializes exactly S⋈T in V_ST.
        if not self.graph and self.eps[1] == 0 and self.eps[2] == 1:
            if self.views[0] or self.views[2]:
                fail("I10: factorized configuration but V_RS or V_TR is nonempty")
            full_s = _merge(self.hf[1], self.lf[1])
            full_t = _merge(self.hf[2], self.lf[2])
            if self.views[1] != _join_view(full_s, full_t)[0]:
                fail("I10: V_ST is not the full S⋈T aggregate")
        # I7: Q equals the O(N^{3/2}) plan over the union of the parts.
        full = [_merge(self.hf[k], self.lf[k]) for k in range(self.nrel)]
        if self.graph:
            full = full * 3
        expect_q, _ = count_triangles(full, [transpose(f) for f in full])
        if expect_q != self.q:
            fail(f"I7: Q = {self.q} but recomputation gives {expect_q}")


def _merge(a: Index, b: Index) -> Index:
    """Union of two parts whose first-variable values are disjoint (checked by I2 first)."""
    out = {x: dict(row) for x, row in a.items()}
    for x, row in b.items():
        out.setdefault(x, {}).update(row)
    return out


def _join_view(left: Index, right: Index) -> tuple[View, int]:
    """V(x, z) = Σ_y left(x, y)·right(y, z), zeros dropped; returns (view, loop iterations)."""
    view: View = {}
    work = 0
    for x, row in left.items():
        work += len(row)
        for y, a in row.items():
            r2 = right.get(y)
            if r2 is None:
                continue
            work += len(r2)
            for z, b in r2.items():
                key = (x, z)
                view[key] = view.get(key, 0) + a * b
    return {key: v for key, v in view.items() if v}, work


__all__ = ["EDGE_RELATION", "IvmEpsEngine", "parse_epsilons"]
