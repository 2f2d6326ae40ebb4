"""Strategy ``dbtoaster``: DBToaster-style partial incrementalization of the finance queries
(docs/vwap/algorithm.md §5.2).

What DBToaster's generated code does for a predicate comparing against a nested aggregate, emulated in
pure Python with plain ints (or exact Decimals):

- every sub-aggregate lives in a hash map keyed by the distinct values of its free/bound columns (for
  VWAP ``m1: price -> Σ price·volume``, ``m2 = Σ volume``, ``m3: price -> Σ volume``), maintained in O(1)
  per update by first-order deltas; an entry is deleted when its value reaches 0 (a missing key is 0);
- the correlated predicate is *not* incrementalized: the result is re-evaluated from the maps by looping
  over the outer map's keys and, for each, over the inner map's keys (the paper's Fig. 2b, read as in
  §9.13: the loop adds ``map1[b_price]``, not ``map1[t.price]``).

The re-evaluation runs in ``result()``, once per batch of updates (the engine asks for the result after
every event, which is the paper's setting); asking twice without an update in between costs nothing.

Per-result costs, D = distinct live prices (K: distinct ``price + volume``; G: distinct (broker, price)):
Ex 2.1 O(#distinct A); VWAP (both forms), SQ1b, NQ1 O(D²); MST O(D_b² + D_a² + G); PSP O(#distinct
volumes); SQ1a O(G·D); SQ2 O(D·K); NQ2 O(D³).

Constants are compared by cross-multiplication with ``fraction = num/den`` (``f·T < S`` as
``num·T < den·S``), so nothing but ints and Decimals is ever touched. ``stats()`` counts the map
entries touched: by the last update plus the re-evaluation that followed it (``work_last``) and in
total (``work_total``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.services.vwap.exact import to_json
from ivmstream.services.vwap.plans.base import LevelChanges, Plan, Row
from ivmstream.services.vwap.plans.finance_recompute import DEFAULTS, QUERIES, resolve_params

__all__ = ["DEFAULTS", "QUERIES", "make_plan"]


def _add(m: dict, key: Any, delta: Any) -> None:
    """m[key] += delta, deleting the entry when it reaches 0 (DBToaster's maps hold no zeros)."""
    v = m.get(key, 0) + delta
    if v:
        m[key] = v
    else:
        m.pop(key, None)


class _DBToasterPlan:
    """Common plumbing: the fraction as num/den, the cached result, the work counters."""

    name = ""  # the result's key
    rels: tuple[str, ...] = ("bids",)

    def __init__(self, params: Mapping[str, Any]) -> None:
        f = params["fraction"]
        self.num: int = f.numerator
        self.den: int = f.denominator
        self.work_last = 0
        self.work_total = 0
        self.evaluations = 0
        self._value: Any = None
        self._fresh = False

    # Subclasses: _delta(rel, row, mult) -> entries touched; _evaluate() -> (value, entries touched).

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel not in self.rels:
            return
        w = self._delta(rel, row, mult)
        self.work_last = w
        self.work_total += w
        self._fresh = False

    def result(self) -> Any:
        if not self._fresh:
            self._value, w = self._evaluate()
            self.work_last += w
            self.work_total += w
            self.evaluations += 1
            self._fresh = True
        return {self.name: self._json(self._value)}

    @staticmethod
    def _json(value: Any) -> Any:
        return to_json(value)

    def _maps(self) -> list[dict]:
        return []

    def stats(self) -> dict[str, float]:
        return {
            "work_last": float(self.work_last),
            "work_total": float(self.work_total),
            "evaluations": float(self.evaluations),
            "map_entries": float(sum(len(m) for m in self._maps())),
        }

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        raise NotImplementedError

    def _evaluate(self) -> tuple[Any, int]:
        raise NotImplementedError


class _SumMaps(_DBToasterPlan):
    """DBToaster's VWAP maps over a (key, weight) column pair, kept by first-order deltas:
    m1: key -> Σ key·weight, m2 = Σ weight, m3: key -> Σ weight (Ex. 2.1: a, b; bids: price, volume)."""

    key = "price"
    weight = "volume"

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.m1: dict[Any, Any] = {}
        self.m2: Any = 0
        self.m3: dict[Any, Any] = {}

    def _maps(self) -> list[dict]:
        return [self.m1, self.m3]

    def domain(self) -> int:
        """Live domain values (keys: the price levels), for ``auto`` (docs/vwap/algorithm.md §6.5)."""
        return len(self.m3)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        k = row[self.key]
        w = row[self.weight] * mult
        _add(self.m1, k, k * w)
        self.m2 += w
        _add(self.m3, k, w)
        return 3

    def apply_levels(self, rel: str, changes: LevelChanges) -> None:
        """A batch netted per key (docs/vwap/algorithm.md §3.6): the maps are functions of each key's
        Σ weight, so one first-order delta per touched key gives the maps the events would."""
        if rel not in self.rels:
            return
        m1, m3 = self.m1, self.m3
        for k, (_dc, dw) in changes.items():
            if dw:
                _add(m1, k, k * dw)
                self.m2 += dw
                _add(m3, k, dw)
        w = 3 * len(changes)
        self.work_last = w
        self.work_total += w
        self._fresh = False


class Ex21(_SumMaps):
    """m1: A -> Σ A·B, m2 = Σ B, m3: A -> Σ B.  Result: Σ m1[a] over a with f·m2 = m3[a]."""

    name = "ex21"
    rels = ("R",)
    key = "a"
    weight = "b"

    def _evaluate(self) -> tuple[Any, int]:
        lhs = self.num * self.m2  # f·m2, scaled by den
        den = self.den
        m3 = self.m3
        res = 0
        for a, ab in self.m1.items():
            if lhs == den * m3.get(a, 0):
                res += ab
        return res, len(self.m1)


class Vwap(_SumMaps):
    """m1: price -> Σ price·volume, m2 = Σ volume, m3: price -> Σ volume.

    DBToaster form: Σ m1[bp] over bp with f·m2 > Σ_{p > bp} m3[p];
    paper form:     Σ m1[bp] over bp with f·m2 < Σ_{p <= bp} m3[p].
    """

    name = "vwap"

    def __init__(self, params: Mapping[str, Any], paper: bool) -> None:
        super().__init__(params)
        self.paper = paper

    def _evaluate(self) -> tuple[Any, int]:
        lhs = self.num * self.m2
        den = self.den
        m3 = self.m3.items()
        res = 0
        if self.paper:
            for bp, pv in self.m1.items():
                rhs = 0
                for p2, v2 in m3:
                    if p2 <= bp:
                        rhs += v2
                if lhs < den * rhs:
                    res += pv
        else:
            for bp, pv in self.m1.items():
                rhs = 0
                for p2, v2 in m3:
                    if p2 > bp:
                        rhs += v2
                if lhs > den * rhs:
                    res += pv
        return res, len(self.m1) * (1 + len(self.m3))


class Mst(_DBToasterPlan):
    """Per side: price -> Σ volume and the total volume (the nested aggregates, over all brokers).

    Bids payload maps are keyed by (broker_id, price): count and Σ price·volume; asks payload maps by
    price. The predicate only depends on the price, so it is evaluated once per distinct price (O(D²) per
    side, as DBToaster's loop over the nested aggregate's domain), then the payload entries are summed:
    broker g gets cnt_g·Σpv_a - cnt_a·Σpv_g over qualifying tuples, present iff cnt_g > 0 and cnt_a > 0.
    """

    name = "mst"
    rels = ("bids", "asks")

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.b_vol: dict[Any, Any] = {}  # price -> Σ volume
        self.b_total: Any = 0
        self.b_cnt: dict[tuple[Any, Any], int] = {}  # (broker, price) -> Σ multiplicity
        self.b_pv: dict[tuple[Any, Any], Any] = {}  # (broker, price) -> Σ price·volume
        self.a_vol: dict[Any, Any] = {}
        self.a_total: Any = 0
        self.a_cnt: dict[Any, int] = {}  # price -> Σ multiplicity
        self.a_pv: dict[Any, Any] = {}  # price -> Σ price·volume

    def _maps(self) -> list[dict]:
        return [self.b_vol, self.b_cnt, self.b_pv, self.a_vol, self.a_cnt, self.a_pv]

    def domain(self) -> int:
        """Live domain values (price levels of both sides), for ``auto`` (docs/vwap/algorithm.md §6.5)."""
        return len(self.b_vol) + len(self.a_vol)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        p = row["price"]
        v = row["volume"] * mult
        if rel == "bids":
            _add(self.b_vol, p, v)
            self.b_total += v
            key = (row["broker_id"], p)
            _add(self.b_cnt, key, mult)
            _add(self.b_pv, key, p * v)
        else:
            _add(self.a_vol, p, v)
            self.a_total += v
            _add(self.a_cnt, p, mult)
            _add(self.a_pv, p, p * v)
        return 4

    def _evaluate(self) -> tuple[Any, int]:
        den = self.den
        # asks: f·Ta > Σ_{p2 > ap} a_vol[p2]
        lhs = self.num * self.a_total
        a_vol = self.a_vol.items()
        a_pv = self.a_pv
        cnt_a = 0
        pv_a = 0
        for ap, c in self.a_cnt.items():
            rhs = 0
            for p2, v2 in a_vol:
                if p2 > ap:
                    rhs += v2
            if lhs > den * rhs:
                cnt_a += c
                pv_a += a_pv.get(ap, 0)
        # bids: the same predicate per distinct bid price, then the (broker, price) entries
        lhs = self.num * self.b_total
        b_vol = self.b_vol.items()
        qualifies = {}
        for bp in self.b_vol:
            rhs = 0
            for p2, v2 in b_vol:
                if p2 > bp:
                    rhs += v2
            qualifies[bp] = lhs > den * rhs
        b_pv = self.b_pv
        cnt_g: dict[Any, int] = {}
        pv_g: dict[Any, Any] = {}
        for key, c in self.b_cnt.items():
            if qualifies[key[1]]:
                g = key[0]
                cnt_g[g] = cnt_g.get(g, 0) + c
                pv_g[g] = pv_g.get(g, 0) + b_pv.get(key, 0)
        groups = {}
        if cnt_a:
            for g, c in cnt_g.items():
                groups[g] = c * pv_a - cnt_a * pv_g[g]
        work = len(self.a_cnt) * (1 + len(self.a_vol)) + len(self.b_vol) * (1 + len(self.b_vol))
        return groups, work + len(self.b_cnt)

    @staticmethod
    def _json(groups: Any) -> Any:
        return {str(g): to_json(v) for g, v in sorted(groups.items(), key=lambda gv: str(gv[0]))}


class Psp(_DBToasterPlan):
    """Per side: volume -> Σ multiplicity, volume -> Σ price, total volume.

    Qualifying tuples (volume > f·T) are found by one loop over each side's distinct volumes; the result
    Σ_{b,a} (a.price - b.price) = cnt_b·Σprice_a - cnt_a·Σprice_b.
    """

    name = "psp"
    rels = ("bids", "asks")

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.b_cnt: dict[Any, int] = {}
        self.b_sp: dict[Any, Any] = {}
        self.b_total: Any = 0
        self.a_cnt: dict[Any, int] = {}
        self.a_sp: dict[Any, Any] = {}
        self.a_total: Any = 0

    def _maps(self) -> list[dict]:
        return [self.b_cnt, self.b_sp, self.a_cnt, self.a_sp]

    def domain(self) -> int:
        """Live domain values (distinct volumes of both sides), for ``auto`` (docs/vwap/algorithm.md §6.5)"""
        return len(self.b_cnt) + len(self.a_cnt)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        vol = row["volume"]
        if rel == "bids":
            _add(self.b_cnt, vol, mult)
            _add(self.b_sp, vol, row["price"] * mult)
            self.b_total += vol * mult
        else:
            _add(self.a_cnt, vol, mult)
            _add(self.a_sp, vol, row["price"] * mult)
            self.a_total += vol * mult
        return 2

    def _side(self, cnt: dict[Any, int], sp: dict[Any, Any], total: Any) -> tuple[int, Any]:
        """One side's count and Σ price over its qualifying volumes (volume > f·total)."""
        den = self.den
        lhs = self.num * total
        n = 0
        s = 0
        for vol, c in cnt.items():
            if den * vol > lhs:
                n += c
                s += sp.get(vol, 0)
        return n, s

    def _evaluate(self) -> tuple[Any, int]:
        cnt_b, sp_b = self._side(self.b_cnt, self.b_sp, self.b_total)
        cnt_a, sp_a = self._side(self.a_cnt, self.a_sp, self.a_total)
        return cnt_b * sp_a - cnt_a * sp_b, len(self.b_cnt) + len(self.a_cnt)


class Sq1a(_DBToasterPlan):
    """m_out: (broker, price) -> Σ price·volume, m_broker: broker -> Σ volume, m_price: price -> Σ volume.

    Σ m_out[g, bp] over entries with f·m_broker[g] < Σ_{p <= bp} m_price[p]: both sides vary per outer
    group, so the loop runs over the (broker, price) groups and, for each, over the prices.
    """

    name = "sq1"

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.m_out: dict[tuple[Any, Any], Any] = {}
        self.m_broker: dict[Any, Any] = {}
        self.m_price: dict[Any, Any] = {}

    def _maps(self) -> list[dict]:
        return [self.m_out, self.m_broker, self.m_price]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.m_price)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        p = row["price"]
        v = row["volume"] * mult
        _add(self.m_out, (row["broker_id"], p), p * v)
        _add(self.m_broker, row["broker_id"], v)
        _add(self.m_price, p, v)
        return 3

    def _evaluate(self) -> tuple[Any, int]:
        num, den = self.num, self.den
        m_broker = self.m_broker
        m_price = self.m_price.items()
        res = 0
        for (g, bp), pv in self.m_out.items():
            rhs = 0
            for p2, v2 in m_price:
                if p2 <= bp:
                    rhs += v2
            if num * m_broker.get(g, 0) < den * rhs:
                res += pv
        return res, len(self.m_out) * (2 + len(self.m_price))


class Sq1b(_DBToasterPlan):
    """m_out: price -> Σ price·volume, m_price: price -> Σ volume.

    Σ m_out[bp] over bp with f·Σ_{p >= bp} m_price[p] < Σ_{p <= bp} m_price[p] (both nested sums are
    taken in one pass over the price map).
    """

    name = "sq1"

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.m_out: dict[Any, Any] = {}
        self.m_price: dict[Any, Any] = {}

    def _maps(self) -> list[dict]:
        return [self.m_out, self.m_price]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.m_price)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        p = row["price"]
        v = row["volume"] * mult
        _add(self.m_out, p, p * v)
        _add(self.m_price, p, v)
        return 2

    def _evaluate(self) -> tuple[Any, int]:
        num, den = self.num, self.den
        m_price = self.m_price.items()
        res = 0
        for bp, pv in self.m_out.items():
            ge = 0
            le = 0
            for p2, v2 in m_price:
                if p2 >= bp:
                    ge += v2
                if p2 <= bp:
                    le += v2
            if num * ge < den * le:
                res += pv
        return res, len(self.m_out) * (1 + len(self.m_price))


class Sq2(_DBToasterPlan):
    """m_out: price -> Σ price·volume, m_bound: (price + volume) -> Σ volume, total volume.

    The inner predicate computes different things on its two sides (bound ``b2.price + b2.volume``, free
    ``b.price``), so the inner map is keyed by the bound expression: Σ m_out[bp] over bp with
    f·T < Σ_{k <= bp} m_bound[k].
    """

    name = "sq2"

    def __init__(self, params: Mapping[str, Any]) -> None:
        super().__init__(params)
        self.m_out: dict[Any, Any] = {}
        self.m_bound: dict[Any, Any] = {}
        self.total: Any = 0

    def _maps(self) -> list[dict]:
        return [self.m_out, self.m_bound]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5); a level
        at price 0 has no entry here."""
        return len(self.m_out)

    def _delta(self, rel: str, row: Row, mult: int) -> int:
        p = row["price"]
        vol = row["volume"]
        v = vol * mult
        _add(self.m_out, p, p * v)
        _add(self.m_bound, p + vol, v)
        self.total += v
        return 3

    def _evaluate(self) -> tuple[Any, int]:
        lhs = self.num * self.total
        den = self.den
        m_bound = self.m_bound.items()
        res = 0
        for bp, pv in self.m_out.items():
            rhs = 0
            for k, v2 in m_bound:
                if k <= bp:
                    rhs += v2
            if lhs < den * rhs:
                res += pv
        return res, len(self.m_out) * (1 + len(self.m_bound))


class Nq1(_SumMaps):
    """VWAP's maps: m1: price -> Σ price·volume, m2 = T = Σ volume, m3: price -> Σ volume.

    Inner level: V = Σ m3[p1] over p1 with f·T < Σ_{p <= p1} m3[p];
    outer level: Σ m1[bp] over bp with f·V < Σ_{p <= bp} m3[p].  Two O(D²) loops.
    """

    name = "nq1"

    def _evaluate(self) -> tuple[Any, int]:
        num, den = self.num, self.den
        m_vol = self.m3.items()
        lhs = num * self.m2
        inner = 0
        for p1, v1 in m_vol:
            s = 0
            for p4, v4 in m_vol:
                if p4 <= p1:
                    s += v4
            if lhs < den * s:
                inner += v1
        lhs = num * inner
        res = 0
        for bp, pv in self.m1.items():
            rhs = 0
            for p2, v2 in m_vol:
                if p2 <= bp:
                    rhs += v2
            if lhs < den * rhs:
                res += pv
        n = len(self.m3)
        return res, n * (1 + n) + len(self.m1) * (1 + n)


class Nq2(_SumMaps):
    """Same maps as NQ1, but the middle aggregate depends on the outer price q, so it is recomputed per q:
    M(q) = Σ m3[p1] over p1 with f·T < Σ_{p <= p1, p <= q} m3[p]; Σ m1[q] over q with
    f·M(q) < Σ_{p <= q} m3[p].  Three nested loops, O(D³).
    """

    name = "nq2"

    def _evaluate(self) -> tuple[Any, int]:
        num, den = self.num, self.den
        m_vol = self.m3.items()
        lhs_inner = num * self.m2
        res = 0
        for bq, pv in self.m1.items():
            middle = 0
            for p1, v1 in m_vol:
                s = 0
                for p4, v4 in m_vol:
                    if p4 <= p1 and p4 <= bq:
                        s += v4
                if lhs_inner < den * s:
                    middle += v1
            rhs = 0
            for p2, v2 in m_vol:
                if p2 <= bq:
                    rhs += v2
            if num * middle < den * rhs:
                res += pv
        n = len(self.m3)
        return res, len(self.m1) * (1 + n * (1 + n) + n)


def make_plan(query: str, params: Mapping[str, Any] | None = None) -> Plan:
    p = resolve_params(query, params)
    if query == "vwap":
        return Vwap(p, paper=False)
    if query == "vwap-paper":
        return Vwap(p, paper=True)
    if query == "sq1":
        return Sq1a(p) if p["variant"] == "a" else Sq1b(p)
    classes: dict[str, Any] = {"ex21": Ex21, "mst": Mst, "psp": Psp, "sq2": Sq2, "nq1": Nq1, "nq2": Nq2}
    return classes[query](p)
