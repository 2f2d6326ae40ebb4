"""The RPAI system's plans for the order-book queries and Ex. 2.1 (docs/vwap/algorithm.md §4.1-§4.6),
and the cross-check (§5.3).

- vwap / vwap-paper / mst / nq1: the §3.2 inequality index (one RPAI tree keyed by each price level's
  inner aggregate), O(log D) per update;
- psp: a non-shifting ordered index volume -> (count, Σ price) per side, O(log D);
- ex21: the PAI hash map of the equality case (§3.1), O(1);
- sq1 / sq2 / nq2: the General Algorithm (§4.6) over ordered per-price state, O(D) or O(D log D);
- crosscheck (vwap, vwap-paper): the independent price-keyed descent of §5.3, no key shifting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ivmstream.services.vwap.exact import to_json
from ivmstream.services.vwap.plans.base import LevelChanges, Row
from ivmstream.services.vwap.trees.index import InequalityIndex, scaled_floor, sum_key_gt, sum_key_lt
from ivmstream.services.vwap.trees.rpai import RPAITree
from ivmstream.services.vwap.trees.vec import Vec


def _index_stats(prefix: str, ix: InequalityIndex) -> dict[str, float]:
    return {f"{prefix}{k}": v for k, v in ix.stats().items()} | {f"{prefix}tree_nodes": len(ix.idx)}


# A plan's ``load_bag`` takes the live tuples per relation (values in column order -> multiplicity) and
# the column names, and builds its state in one pass plus one ascending tree build (§3.5), rather than
# one update per tuple: strategy ``auto`` rebuilds plans from the live book when it switches (§6.5).
Bag = Mapping[str, Mapping[tuple[Any, ...], int]]
Columns = Mapping[str, Sequence[str]]


def _positions(columns: Sequence[str], *names: str) -> tuple[int, ...]:
    return tuple(columns.index(n) for n in names)


def _sum_level(levels: dict[Any, list[Any]], p: Any, m: int, w: Any) -> None:
    """Add m copies of a tuple (price p, volume w) to its level's (count, W, PV)."""
    acc = levels.get(p)
    if acc is None:
        levels[p] = acc = [0, 0, 0]
    acc[0] += m
    acc[1] += m * w
    acc[2] += m * p * w


class _OneIndexPlan:
    """The stats and trees of a plan over one inequality index, ``self.index``."""

    index: InequalityIndex

    def stats(self) -> dict[str, float]:
        return _index_stats("", self.index)

    def trees(self) -> list[RPAITree]:
        return [self.index.idx, self.index.bound]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.index)


class VwapPlan(_OneIndexPlan):
    """DBToaster form (θ '>': key S>(q), qualifying key < f·T) or paper form (θ '<=': key > f·T)."""

    def __init__(self, params: Mapping[str, Any], paper: bool) -> None:
        self.f: Fraction = params["fraction"]
        self.paper = paper
        self.index = InequalityIndex("<=" if paper else ">")

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel == "bids":
            p = row["price"]
            w = row["volume"]
            self.index.update(p, mult, w, p * w)

    def load_levels(self, levels: Mapping[str, list[tuple[Any, Any, int, Any]]]) -> None:
        """Restore in one ascending pass from per-price (price, W, cnt, PV): keys by prefix sums."""
        self.index.build(levels["bids"])

    def apply_levels(self, rel: str, changes: LevelChanges) -> None:
        """A batch netted per price level: one index move per level touched (docs/vwap/algorithm.md §3.6)."""
        if rel == "bids":
            move = self.index.update_level
            for p, (dc, dw) in changes.items():
                move(p, dc, dw, p * dw)

    def value(self) -> Any:
        ix = self.index
        if self.paper:
            return sum_key_gt(ix.idx, self.f, ix.total)
        return sum_key_lt(ix.idx, self.f, ix.total)

    def result(self) -> Any:
        return {"vwap": to_json(self.value())}


class MstPlan:
    """Missed trades: one θ '>' index per side; bids carry (count, Σpv) per broker, asks (count, Σpv)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.brokers: int = params["brokers"]
        self.bids = InequalityIndex(">", Vec.zero(2 * self.brokers))
        self.asks = InequalityIndex(">", Vec.zero(2))

    def update(self, rel: str, row: Row, mult: int) -> None:
        p = row["price"]
        w = row["volume"]
        if rel == "bids":
            pay = [0] * (2 * self.brokers)
            g = row["broker_id"]
            pay[2 * g] = 1
            pay[2 * g + 1] = p * w
            self.bids.update(p, mult, w, Vec(pay))
        elif rel == "asks":
            self.asks.update(p, mult, w, Vec((1, p * w)))

    def load_bag(self, bag: Bag, columns: Columns) -> None:
        """Bulk build from the live tuples: each side's price levels, then one ascending pass (§3.5)."""
        width = 2 * self.brokers
        bids: dict[Any, list[Any]] = {}
        ip, iw, ig = _positions(columns["bids"], "price", "volume", "broker_id")
        for vals, m in bag["bids"].items():
            p, w, g = vals[ip], vals[iw], vals[ig]
            acc = bids.get(p)
            if acc is None:
                bids[p] = acc = [0, 0, [0] * width]
            acc[0] += m * w
            acc[1] += m
            acc[2][2 * g] += m
            acc[2][2 * g + 1] += m * p * w
        asks: dict[Any, list[Any]] = {}
        ip, iw = _positions(columns["asks"], "price", "volume")
        for vals, m in bag["asks"].items():
            p, w = vals[ip], vals[iw]
            acc = asks.get(p)
            if acc is None:
                asks[p] = acc = [0, 0, 0]
            acc[0] += m * w
            acc[1] += m
            acc[2] += m * p * w
        self.bids = InequalityIndex(">", Vec.zero(width))
        self.bids.build((p, a[0], a[1], Vec(a[2])) for p, a in sorted(bids.items()))
        self.asks = InequalityIndex(">", Vec.zero(2))
        self.asks.build((p, a[0], a[1], Vec((a[1], a[2]))) for p, a in sorted(asks.items()))

    def result(self) -> Any:
        qa = sum_key_lt(self.asks.idx, self.f, self.asks.total)
        out: dict[str, Any] = {}
        if qa[0] > 0:
            qb = sum_key_lt(self.bids.idx, self.f, self.bids.total)
            for g in range(self.brokers):
                cg = qb[2 * g]
                if cg > 0:
                    out[str(g)] = to_json(cg * qa[1] - qa[0] * qb[2 * g + 1])
        return {"mst": dict(sorted(out.items()))}

    def stats(self) -> dict[str, float]:
        return _index_stats("bids_", self.bids) | _index_stats("asks_", self.asks)

    def trees(self) -> list[RPAITree]:
        return [self.bids.idx, self.bids.bound, self.asks.idx, self.asks.bound]

    def domain(self) -> int:
        """Live domain values (price levels of both sides), for ``auto`` (docs/vwap/algorithm.md §6.5)."""
        return len(self.bids) + len(self.asks)


class _CountedTree:
    """An RPAI tree key -> Vec(count, ...) that drops a key when its count reaches 0, plus a running
    total: PSP's sides (volume -> (count, Σ price)) and the GA plans' levels (price -> (count, W, PV))."""

    __slots__ = ("total", "tree")

    def __init__(self, width: int) -> None:
        self.tree = RPAITree(Vec.zero(width))
        self.total: Any = 0

    def update(self, k: Any, pay: Vec, dw: Any) -> None:
        tree = self.tree
        tree.add(k, pay)
        if tree.get(k)[0] == 0:
            tree.delete(k)
        self.total += dw

    def load(self, sums: Mapping[Any, list[Any]], total: Any) -> None:
        """Bulk build from key -> payload sums (count first, never 0): one ascending pass."""
        self.tree = RPAITree.from_sorted(((k, Vec(v)) for k, v in sorted(sums.items())), self.tree.zero)
        self.total = total


class PspPlan:
    """Price spread: qualifying tuples have volume > f·T of their side; result cnt_b·Σp_a - cnt_a·Σp_b."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.sides = {"bids": _CountedTree(2), "asks": _CountedTree(2)}

    def update(self, rel: str, row: Row, mult: int) -> None:
        side = self.sides.get(rel)
        if side is not None:
            w = row["volume"]
            side.update(w, Vec((mult, mult * row["price"])), mult * w)

    def load_bag(self, bag: Bag, columns: Columns) -> None:
        """Bulk build from the live tuples: per side, volume -> (count, Σ price), one ascending pass."""
        for rel, side in self.sides.items():
            iw, ip = _positions(columns[rel], "volume", "price")
            sums: dict[Any, list[Any]] = {}
            total: Any = 0
            for vals, m in bag[rel].items():
                w = vals[iw]
                acc = sums.get(w)
                if acc is None:
                    sums[w] = acc = [0, 0]
                acc[0] += m
                acc[1] += m * vals[ip]
                total += m * w
            side.load(sums, total)

    def result(self) -> Any:
        b, a = self.sides["bids"], self.sides["asks"]
        qb = sum_key_gt(b.tree, self.f, b.total)
        qa = sum_key_gt(a.tree, self.f, a.total)
        return {"psp": to_json(qb[0] * qa[1] - qa[0] * qb[1])}

    def stats(self) -> dict[str, float]:
        return {"bids_volumes": len(self.sides["bids"].tree), "asks_volumes": len(self.sides["asks"].tree)}

    def trees(self) -> list[RPAITree]:
        return [s.tree for s in self.sides.values()]

    def domain(self) -> int:
        """Live domain values (distinct volumes of both sides), for ``auto`` (docs/vwap/algorithm.md §6.5)"""
        return len(self.sides["bids"].tree) + len(self.sides["asks"].tree)


class _BidsIndexPlan(_OneIndexPlan):
    """A plan over one θ '<=' index on bids with payload (volume, price·volume) (NQ1, NQ2)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.index = InequalityIndex("<=", Vec.zero(2))

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel == "bids":
            p = row["price"]
            w = row["volume"]
            self.index.update(p, mult, w, Vec((w, p * w)))

    def load_levels(self, levels: Mapping[str, list[tuple[Any, Any, int, Any]]]) -> None:
        self.index.build((p, w, c, Vec((w, pv))) for p, w, c, pv in levels["bids"])

    def apply_levels(self, rel: str, changes: LevelChanges) -> None:
        """A batch netted per price level (docs/vwap/algorithm.md §3.6)."""
        if rel == "bids":
            move = self.index.update_level
            for p, (dc, dw) in changes.items():
                move(p, dc, dw, Vec((dw, p * dw)))


class Nq1Plan(_BidsIndexPlan):
    """Two nesting levels on one θ '<=' index with payload (volume, price·volume)
    (docs/vwap/algorithm.md §4.5)."""

    def result(self) -> Any:
        ix = self.index
        t = ix.total
        v = sum_key_gt(ix.idx, self.f, t)[0]  # middle level: Σ volume of the tuples VWAP selects
        return {"nq1": to_json(sum_key_gt(ix.idx, self.f, v, grid=t)[1])}


class Nq2Plan(_BidsIndexPlan):
    """GA at the top level (docs/vwap/algorithm.md §4.6): per outer price q, the middle aggregate
    M(q) = Σ vol over keys in (f·T, S≤(q)] + [S≤(q) > f·T]·Σ vol over prices > q, each O(log D)."""

    def result(self) -> Any:
        ix = self.index
        idx = ix.idx
        t = ix.total
        f = self.f
        cut = scaled_floor(f, t)  # key > cut ⇔ key > f·T
        low = idx.prefix_le(cut)[0]  # Σ vol over keys <= f·T
        num, den = f.numerator, f.denominator
        res: Any = 0
        for key, (_vol, pv) in idx.items():  # key = S≤(q) of outer group q
            m = idx.prefix_le(key)[0] - low + (t - key) if key > cut else 0
            if num * m < den * key:  # f·M(q) < S≤(q)
                res += pv
        return {"nq2": to_json(res)}


class Sq1Plan:
    """GA: both sides of the predicate vary per outer tuple (docs/vwap/algorithm.md §1.3, §4.6).

    a: f·Σ vol of the outer tuple's broker < S≤(price); b: f·Σ vol at prices >= price < S≤(price)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.variant: str = params["variant"]
        self.levels = _CountedTree(3)
        self.broker_vol: dict[Any, Any] = {}
        self.groups: dict[Any, dict[Any, list[Any]]] = {}  # price -> broker -> [count, Σpv]

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel != "bids":
            return
        p = row["price"]
        w = row["volume"]
        g = row["broker_id"]
        self.levels.update(p, Vec((mult, mult * w, mult * p * w)), mult * w)
        bv = self.broker_vol.get(g, 0) + mult * w
        if bv:
            self.broker_vol[g] = bv
        else:
            self.broker_vol.pop(g, None)
        by_broker = self.groups.setdefault(p, {})
        acc = by_broker.setdefault(g, [0, 0])
        acc[0] += mult
        acc[1] += mult * p * w
        if acc[0] == 0:
            del by_broker[g]
            if not by_broker:
                del self.groups[p]

    def load_bag(self, bag: Bag, columns: Columns) -> None:
        """Bulk build from the live tuples: levels in one ascending pass, the maps summed directly."""
        ip, iw, ig = _positions(columns["bids"], "price", "volume", "broker_id")
        levels: dict[Any, list[Any]] = {}
        total: Any = 0
        for vals, m in bag["bids"].items():
            p, w, g = vals[ip], vals[iw], vals[ig]
            _sum_level(levels, p, m, w)
            total += m * w
            self.broker_vol[g] = self.broker_vol.get(g, 0) + m * w
            acc = self.groups.setdefault(p, {}).setdefault(g, [0, 0])
            acc[0] += m
            acc[1] += m * p * w
        self.levels.load(levels, total)

    def result(self) -> Any:
        num, den = self.f.numerator, self.f.denominator
        t = self.levels.total
        res: Any = 0
        run: Any = 0  # Σ vol at prices < current
        for p, (_c, w, pv) in self.levels.tree.items():
            le = run + w
            if self.variant == "a":
                for g, (_n, gpv) in self.groups[p].items():
                    if num * self.broker_vol[g] < den * le:
                        res += gpv
            elif num * (t - run) < den * le:
                res += pv
            run = le
        return {"sq1": to_json(res)}

    def stats(self) -> dict[str, float]:
        return {"levels": len(self.levels.tree), "brokers": len(self.broker_vol)}

    def trees(self) -> list[RPAITree]:
        return [self.levels.tree]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.levels.tree)


class Sq2Plan:
    """GA: the inner predicate compares price + volume with the outer price
    (docs/vwap/algorithm.md §1.3, §4.6)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.levels = _CountedTree(3)
        self.reach = RPAITree()  # price + volume -> Σ volume (the bound side)
        self.reach_cnt: dict[Any, int] = {}

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel != "bids":
            return
        p = row["price"]
        w = row["volume"]
        self.levels.update(p, Vec((mult, mult * w, mult * p * w)), mult * w)
        r = p + w
        c = self.reach_cnt.get(r, 0) + mult
        if c:
            self.reach_cnt[r] = c
            self.reach.add(r, mult * w)
        else:
            del self.reach_cnt[r]
            self.reach.delete(r)

    def load_bag(self, bag: Bag, columns: Columns) -> None:
        """Bulk build from the live tuples: levels and the bound side, each in one ascending pass."""
        ip, iw = _positions(columns["bids"], "price", "volume")
        levels: dict[Any, list[Any]] = {}
        reach: dict[Any, Any] = {}
        total: Any = 0
        for vals, m in bag["bids"].items():
            p, w = vals[ip], vals[iw]
            _sum_level(levels, p, m, w)
            total += m * w
            r = p + w
            reach[r] = reach.get(r, 0) + m * w
            self.reach_cnt[r] = self.reach_cnt.get(r, 0) + m
        self.levels.load(levels, total)
        self.reach = RPAITree.from_sorted(sorted(reach.items()))

    def result(self) -> Any:
        num, den = self.f.numerator, self.f.denominator
        t = self.levels.total
        res: Any = 0
        inner = iter(self.reach.items())
        nxt = next(inner, None)
        s: Any = 0  # Σ vol of tuples with price + volume <= current outer price
        for p, (_c, _w, pv) in self.levels.tree.items():
            while nxt is not None and nxt[0] <= p:
                s += nxt[1]
                nxt = next(inner, None)
            if num * t < den * s:
                res += pv
        return {"sq2": to_json(res)}

    def stats(self) -> dict[str, float]:
        return {"levels": len(self.levels.tree), "reach_keys": len(self.reach)}

    def trees(self) -> list[RPAITree]:
        return [self.levels.tree, self.reach]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.levels.tree)


class Ex21Plan:
    """PAI hash map, equality correlation (docs/vwap/algorithm.md §3.1): aggrMap groups' Σ b -> Σ of
    their a·b."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.f: Fraction = params["fraction"]
        self.m1: dict[Any, Any] = {}  # a -> Σ a·b
        self.m3: dict[Any, Any] = {}  # a -> Σ b
        self.cnt: dict[Any, int] = {}  # a -> live tuples
        self.m2: Any = 0  # Σ b
        self.aggr: dict[Any, Any] = {}  # Σ b of a group -> Σ a·b over the groups with that Σ b

    def _move(self, key: Any, dv: Any) -> None:
        v = self.aggr.get(key, 0) + dv
        if v:
            self.aggr[key] = v
        else:
            self.aggr.pop(key, None)

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel != "R":
            return
        a = row["a"]
        b = row["b"]
        c = self.cnt.get(a, 0)
        old = self.m3.get(a, 0)
        oldv = self.m1.get(a, 0)
        if c:
            # only group a's share leaves the shared bucket (docs/vwap/algorithm.md §9.8)
            self._move(old, -oldv)
        c += mult
        self.m2 += mult * b
        if c:
            new = old + mult * b
            newv = oldv + mult * a * b
            self.cnt[a], self.m3[a], self.m1[a] = c, new, newv
            self._move(new, newv)
        else:
            del self.cnt[a], self.m3[a], self.m1[a]

    def result(self) -> Any:
        return {"ex21": to_json(self.aggr.get(self.f * Fraction(self.m2), 0))}

    def stats(self) -> dict[str, float]:
        return {"groups": len(self.cnt), "buckets": len(self.aggr)}

    def trees(self) -> list[RPAITree]:
        return []


class CrossCheckPlan:
    """docs/vwap/algorithm.md §5.3: price-keyed trees of W and Σpv; descend by cumulative weight to the
    first qualifying price p* (S≤(p*) > g·T, g = f in the paper form, 1 - f in DBToaster's) and sum pv
    above it."""

    def __init__(self, params: Mapping[str, Any], paper: bool) -> None:
        f: Fraction = params["fraction"]
        self.g = f if paper else 1 - f
        self._g_num, self._g_den = self.g.numerator, self.g.denominator
        self.w = RPAITree()
        self.pv = RPAITree()
        self.cnt: dict[Any, int] = {}
        self.total: Any = 0

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel != "bids":
            return
        p = row["price"]
        w = row["volume"]
        c = self.cnt.get(p, 0) + mult
        self.total += mult * w
        if c:
            self.cnt[p] = c
            self.w.add(p, mult * w)
            self.pv.add(p, mult * p * w)
        else:
            del self.cnt[p]
            self.w.delete(p)
            self.pv.delete(p)

    def apply_levels(self, rel: str, changes: LevelChanges) -> None:
        """A batch netted per price level: one add (or delete) per level and tree (§3.6)."""
        if rel != "bids":
            return
        cnt = self.cnt
        for p, (dc, dw) in changes.items():
            old = cnt.get(p, 0)
            c = old + dc
            if (not c and not old) or (not dc and not dw):
                continue
            self.total += dw
            if c:
                cnt[p] = c
                self.w.add(p, dw)
                self.pv.add(p, p * dw)
            else:
                del cnt[p]
                self.w.delete(p)
                self.pv.delete(p)

    def load_levels(self, levels: Mapping[str, list[tuple[Any, Any, int, Any]]]) -> None:
        """Restore in one ascending pass from per-price (price, W, cnt, PV)."""
        bids = levels["bids"]
        self.w = RPAITree.from_sorted((p, w) for p, w, _c, _pv in bids)
        self.pv = RPAITree.from_sorted((p, pv) for p, _w, _c, pv in bids)
        self.cnt = {p: c for p, _w, c, _pv in bids}
        self.total = sum((w for _p, w, _c, _pv in bids), 0)

    def result(self) -> Any:
        if not self.cnt:
            return {"vwap": 0}
        t = self.total
        # k > g·t ⇔ k > ⌊g·t⌋ for integer keys: one integer division, no Fraction arithmetic
        bound = self._g_num * t // self._g_den if type(t) is int else scaled_floor(self.g, t)
        star = self.w.min_key_prefix_gt(bound)
        return {"vwap": to_json(0 if star is None else self.pv.suffix_ge(star))}

    def stats(self) -> dict[str, float]:
        return {"levels": len(self.cnt)}

    def trees(self) -> list[RPAITree]:
        return [self.w, self.pv]

    def domain(self) -> int:
        """Live domain values (price levels) for ``auto``'s cost model (docs/vwap/algorithm.md §6.5)."""
        return len(self.cnt)


RPAI_QUERIES = ("vwap", "vwap-paper", "ex21", "mst", "psp", "sq1", "sq2", "nq1", "nq2")
CROSSCHECK_QUERIES = ("vwap", "vwap-paper")


def make_rpai_plan(query: str, params: Mapping[str, Any]) -> Any:
    if query in ("vwap", "vwap-paper"):
        return VwapPlan(params, paper=query == "vwap-paper")
    plans = {"mst": MstPlan, "psp": PspPlan, "nq1": Nq1Plan, "nq2": Nq2Plan, "sq1": Sq1Plan}
    plans |= {"sq2": Sq2Plan, "ex21": Ex21Plan}
    if query not in plans:
        raise ValueError(f"no rpai plan for query {query!r}")
    return plans[query](params)


def make_crosscheck_plan(query: str, params: Mapping[str, Any]) -> Any:
    if query not in CROSSCHECK_QUERIES:
        raise ValueError(f"strategy 'crosscheck' supports {', '.join(CROSSCHECK_QUERIES)}, not {query!r}")
    return CrossCheckPlan(params, paper=query == "vwap-paper")
