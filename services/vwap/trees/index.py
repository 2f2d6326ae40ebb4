"""The inequality aggregate index of docs/vwap/algorithm.md §3.2-§3.5: one RPAI node per live group
(price level), keyed by the group's current inner aggregate, so a single update moves a whole range of
keys in O(log D).

For an inner predicate ``inner.c θ outer.c`` the key of group q is Σ w over the tuples whose c stands
in relation θ to q. All sums are taken over the state *before* the update (§9.3):

    θ     key(q)        shift by X·w        new key of p
    <=    Σ_{c<=q} w    keys >  Σ_{c<p}     old Σ_{c<=p} + X·w
    <     Σ_{c<q} w     keys >= Σ_{c<=p}    old Σ_{c<p}
    >=    Σ_{c>=q} w    keys >  Σ_{c>p}     old Σ_{c>=p} + X·w
    >     Σ_{c>q} w     keys >= Σ_{c>=p}    old Σ_{c>p}

A group that an update empties is deleted *before* the shift, so two keys never collide while all
weights are positive (the engine refuses non-positive volumes).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ivmstream.services.vwap.trees.rpai import RPAITree

THETAS = ("<=", "<", ">=", ">")


class InequalityIndex:
    """bound (price -> W, never shifted) + cnt + T + idx (key -> Σ payload) for one relation and θ."""

    __slots__ = ("bound", "cnt", "idx", "shifts", "theta", "total", "zero")

    def __init__(self, theta: str, zero: Any = 0) -> None:
        if theta not in THETAS:
            raise ValueError(f"theta must be one of {THETAS}, got {theta!r}")
        self.theta = theta
        self.zero = zero
        self.bound = RPAITree()  # price -> Σ w, O(log D) prefix sums (docs/vwap/algorithm.md §9.7)
        self.cnt: dict[Any, int] = {}  # price -> number of live tuples (with multiplicity)
        self.total: Any = 0  # T = Σ w
        self.idx = RPAITree(zero)
        self.shifts = 0

    def __len__(self) -> int:
        return len(self.cnt)

    def update(self, p: Any, x: int, w: Any, pay: Any) -> None:
        """Apply x copies (x < 0: delete) of a tuple with correlated value p, weight w > 0, payload pay."""
        self.update_level(p, x, x * w, x * pay)

    def update_level(self, p: Any, dc: int, dw: Any, dpay: Any) -> None:
        """Move group p by a netted change: dc tuples, dw weight, dpay payload (docs/vwap/algorithm.md
        §3.6). Any net change keeps the keys ordered as long as the group's weight stays positive while
        it is live, which the ledger guarantees; a group created and emptied within one batch is a
        no-op."""
        old_c = self.cnt.get(p, 0)
        c = old_c + dc
        if (not c and not old_c) or (not dc and not dw and dpay == self.zero):
            return
        bound = self.bound
        le = bound.prefix_le(p)
        wp = bound.get(p, 0) if old_c else 0
        lt = le - wp
        t = self.total
        theta = self.theta
        emptied = c == 0
        if theta == "<=":
            old_key, thr, incl, new_key = le, lt, False, le + dw
        elif theta == ">":
            old_key = new_key = t - le
            thr, incl = t - lt, True
        elif theta == "<":
            old_key = new_key = lt
            thr, incl = le, True
        else:  # ">="
            old_key, thr, incl, new_key = t - lt, t - le, False, t - lt + dw
        idx = self.idx
        if emptied:
            idx.delete(old_key)
        idx.shift(thr, dw, incl)
        self.shifts += 1
        self.total = t + dw
        if emptied:
            bound.delete(p)
            del self.cnt[p]
        else:
            bound.add(p, dw)
            self.cnt[p] = c
            idx.add(new_key, dpay)

    def group_key(self, p: Any) -> Any:
        """Key of group p computed from ``bound`` by the θ formula (for invariant checks and tests)."""
        le = self.bound.prefix_le(p)
        lt = le - self.bound.get(p, 0)
        t = self.total
        return {"<=": le, "<": lt, ">=": t - lt, ">": t - le}[self.theta]

    def build(self, levels: Iterable[tuple[Any, Any, int, Any]]) -> None:
        """Bulk load from per-price (price, W, cnt, payload), prices ascending: one pass, no shifts."""
        levels = list(levels)
        total = sum((lv[1] for lv in levels), 0)
        keys = []
        run = 0
        for price, w, c, pay in levels:
            lt, run = run, run + w
            key = {"<=": run, "<": lt, ">=": total - lt, ">": total - run}[self.theta]
            keys.append((key, pay))
            self.cnt[price] = c
        self.bound = RPAITree.from_sorted([(lv[0], lv[1]) for lv in levels])
        if self.theta in (">=", ">"):
            keys.reverse()
        self.idx = RPAITree.from_sorted(keys, self.zero)
        self.total = total

    def stats(self) -> dict[str, float]:
        return {
            "levels": len(self.cnt),
            "shifts": self.shifts,
            "shift_merges": self.idx.shift_merges,
            "shift_fallbacks": self.idx.shift_fallbacks,
        }


def grid_floor(x: Fraction, grid: Any) -> Any:
    """The greatest value on ``grid``'s lattice that is <= x: an int for int grids, else a Decimal.

    Keys are sums of weights, and a sum of ints is an int while a sum of decimals is a multiple of
    10^e, e the smallest exponent ever added (exact Decimal addition keeps it; it is the exponent of
    the running total). For keys k on that lattice, k > x ⇔ k > grid_floor(x) and k < x ⇔
    k < grid_ceil(x), so the trees compare keys with a value of their own kind, never a Fraction."""
    if type(grid) is int:
        return x.numerator // x.denominator
    e = grid.as_tuple().exponent
    step = Fraction(10) ** e
    return Decimal((x / step).__floor__()).scaleb(e)


def grid_ceil(x: Fraction, grid: Any) -> Any:
    if type(grid) is int:
        return -(-x.numerator // x.denominator)
    e = grid.as_tuple().exponent
    step = Fraction(10) ** e
    return Decimal((x / step).__ceil__()).scaleb(e)


def _int_grid(t: Any, grid: Any) -> bool:
    """Integer keys and total: the bound is one integer division, no Fraction (read once per batch)."""
    return type(t) is int and (grid is None or type(grid) is int)


def sum_key_lt(idx: RPAITree, f: Fraction, t: Any, grid: Any = None) -> Any:
    """Σ payload over keys k < f·t, exactly; ``grid`` is the total the keys are sums of (default t)."""
    if _int_grid(t, grid):
        return idx.prefix_lt(-(-f.numerator * t // f.denominator))
    return idx.prefix_lt(grid_ceil(f * Fraction(t), t if grid is None else grid))


def sum_key_gt(idx: RPAITree, f: Fraction, t: Any, grid: Any = None) -> Any:
    """Σ payload over keys k > f·t, exactly."""
    if _int_grid(t, grid):
        return idx.suffix_gt(f.numerator * t // f.denominator)
    return idx.suffix_gt(grid_floor(f * Fraction(t), t if grid is None else grid))


def scaled_floor(f: Fraction, t: Any) -> Any:
    """A bound with ``k > bound ⇔ k > f·t`` for keys on t's lattice."""
    if type(t) is int:
        return f.numerator * t // f.denominator
    return grid_floor(f * Fraction(t), t)
