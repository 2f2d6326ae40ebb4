"""TPC-H Q17 and DBToaster's Q17a in three strategies: recompute, dbtoaster (domain extraction) and rpai
(a non-shifting RPAI tree per partkey); ``ivmstream.services.vwap.plans.tpch`` says what each computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ivmstream.services.vwap.exact import EXACT, decimal_quotient, to_json
from ivmstream.services.vwap.plans.base import Row
from ivmstream.services.vwap.plans.tpch_base import (
    _bag_update,
    _columns,
    _zero_if_empty,
    tpch_params,
)
from ivmstream.services.vwap.trees.rpai import RPAITree, black_height


def _q17_result(total: Any) -> dict[str, Any]:
    return {"avg_yearly": decimal_quotient(total, 7), "sum_extendedprice": to_json(_zero_if_empty(total))}


def _q17a_result(total: Any) -> dict[str, Any]:
    return {"sum_extendedprice": to_json(_zero_if_empty(total))}


class _Q17Base:
    query = "q17"
    strategy = ""

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        p = tpch_params(self.query, params)
        self.brand: str | None = p.get("brand")  # None: no selection on part (Q17a)
        self.container: str | None = p.get("container")
        # Q17 compares with fraction·AVG = fraction·Σqty/count, Q17a with fraction·SUM = fraction·Σqty
        self.per_count = self.query == "q17"
        self.fraction: Fraction = p["fraction"]
        self._fp = self.fraction.numerator
        self._fq = self.fraction.denominator
        self.lineitem_updates = 0
        self.part_updates = 0

    def part_qualifies(self, brand: Any, container: Any) -> bool:
        return (self.brand is None or brand == self.brand) and (
            self.container is None or container == self.container
        )

    def _result(self, total: Any) -> dict[str, Any]:
        return _q17_result(total) if self.per_count else _q17a_result(total)


class Q17Recompute(_Q17Base):
    """The SQL evaluated literally: for each part, each lineitem, the AVG subquery by a full scan."""

    strategy = "recompute"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self._cols = _columns(("lineitem", "part"))
        self.bag: dict[str, dict[tuple[Any, ...], int]] = {"lineitem": {}, "part": {}}
        li = self._cols["lineitem"]
        pa = self._cols["part"]
        self._l_pk, self._l_qty = li.index("partkey"), li.index("quantity")
        self._l_ext = li.index("extendedprice")
        self._p_pk, self._p_brand = pa.index("partkey"), pa.index("brand")
        self._p_cont = pa.index("container")
        self.last_work = 0

    def update(self, rel: str, row: Row, mult: int) -> None:
        if not _bag_update(self.bag, self._cols, rel, row, mult):
            return
        if rel == "lineitem":
            self.lineitem_updates += 1
        else:
            self.part_updates += 1

    def total(self) -> Any:
        lpk, lqty, lext = self._l_pk, self._l_qty, self._l_ext
        lineitems = self.bag["lineitem"]
        total: Any = 0
        work = 0
        for p, pm in self.bag["part"].items():
            work += 1
            if not self.part_qualifies(p[self._p_brand], p[self._p_cont]):
                continue
            pk = p[self._p_pk]
            for li, lm in lineitems.items():
                work += 1
                if li[lpk] != pk:
                    continue
                # (SELECT fraction * AVG(l2.quantity) FROM lineitem l2 WHERE l2.partkey = p.partkey)
                sq: Any = 0
                cnt = 0
                for l2, m2 in lineitems.items():
                    work += 1
                    if l2[lpk] == pk:
                        sq += m2 * l2[lqty]
                        cnt += m2
                if cnt == 0:  # AVG of nothing is NULL: the comparison is not true
                    continue
                if Fraction(li[lqty]) < self.fraction * Fraction(sq) / (cnt if self.per_count else 1):
                    total += li[lext] * lm * pm
        self.last_work = work
        return total

    def result(self) -> dict[str, Any]:
        return self._result(self.total())

    def stats(self) -> dict[str, float]:
        return {
            "live_lineitems": float(sum(self.bag["lineitem"].values())),
            "live_parts": float(sum(self.bag["part"].values())),
            "lineitem_updates": float(self.lineitem_updates),
            "part_updates": float(self.part_updates),
            "last_result_loop_work": float(self.last_work),
        }


class _Q17Incremental(_Q17Base):
    """State shared by the DBToaster-style and RPAI plans: per partkey (Σ quantity, count), the cached
    contribution C(pk) = Σ extendedprice of the partkey's qualifying lineitems (one copy of each part),
    and the multiplicity of qualifying parts; ``res`` = Σ_pk pmult(pk)·C(pk)."""

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.sumq: dict[int, Any] = {}
        self.cnt: dict[int, int] = {}
        self.contrib: dict[int, Any] = {}
        self.pmult: dict[int, int] = {}
        self.res: Any = 0

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel == "lineitem":
            self.lineitem_updates += 1
            self._lineitem(row["partkey"], row["quantity"], row["extendedprice"], mult)
        elif rel == "part":
            self.part_updates += 1
            if not self.part_qualifies(row["brand"], row["container"]):
                return
            pk = row["partkey"]
            m = self.pmult.get(pk, 0) + mult
            if m:
                self.pmult[pk] = m
            else:
                del self.pmult[pk]
            c = self.contrib.get(pk)
            if c:
                self.res += mult * c

    def _lineitem(self, pk: int, qty: Any, ext: Any, mult: int) -> None:
        raise NotImplementedError

    def _count(self, pk: int, qty: Any, mult: int) -> int:
        """Moves pk's count and Σ quantity and returns the count; at 0 pk's entries and contribution go."""
        c = self.cnt.get(pk, 0) + mult
        if c:
            self.cnt[pk] = c
            self.sumq[pk] = self.sumq.get(pk, 0) + mult * qty
        else:
            del self.cnt[pk]
            del self.sumq[pk]
            self._set_contrib(pk, 0)
        return c

    def _set_contrib(self, pk: int, new: Any) -> None:
        old = self.contrib.get(pk, 0)
        if new:
            self.contrib[pk] = new
        elif old:
            del self.contrib[pk]
        if new != old:
            pm = self.pmult.get(pk)
            if pm:
                self.res += pm * (new - old)

    def result(self) -> dict[str, Any]:
        return self._result(self.res)

    def _base_stats(self) -> dict[str, float]:
        return {
            "partkeys": float(len(self.cnt)),
            "qualifying_partkeys": float(len(self.pmult)),
            "contributing_partkeys": float(sum(1 for pk in self.contrib if pk in self.pmult)),
            "lineitem_updates": float(self.lineitem_updates),
            "part_updates": float(self.part_updates),
        }


class Q17DBToaster(_Q17Incremental):
    """docs/vwap/algorithm.md §5.2: ``partkey -> quantity -> Σ extendedprice`` and
    ``partkey -> (Σ qty, count)``; a lineitem update re-evaluates its partkey's contribution by a loop
    over that partkey's distinct quantities, comparing ``q·count·qty < p·Σqty`` for fraction p/q. Map
    entries are dropped at multiplicity 0."""

    strategy = "dbtoaster"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        # per partkey: quantity -> [multiplicity, Σ extendedprice]
        self.qmap: dict[int, dict[Any, list[Any]]] = {}
        self.entries = 0
        self.loop_work = 0
        self.last_loop = 0
        self.max_loop = 0

    def _lineitem(self, pk: int, qty: Any, ext: Any, mult: int) -> None:
        m = self.qmap.get(pk)
        if m is None:
            m = self.qmap[pk] = {}
        e = m.get(qty)
        if e is None:
            m[qty] = [mult, mult * ext]
            self.entries += 1
        else:
            n = e[0] + mult
            if n:
                e[0] = n
                e[1] += mult * ext
            else:
                del m[qty]
                self.entries -= 1
        c = self._count(pk, qty, mult)
        if c == 0:
            del self.qmap[pk]
            self.last_loop = 0
            return
        lhs = self._fq * c if self.per_count else self._fq
        rhs = self._fp * self.sumq[pk]
        new: Any = 0
        for q, (_, s) in m.items():  # domain extraction: this partkey's distinct quantities only
            if lhs * q < rhs:
                new += s
        n = len(m)
        self.loop_work += n
        self.last_loop = n
        if n > self.max_loop:
            self.max_loop = n
        self._set_contrib(pk, new)

    def stats(self) -> dict[str, float]:
        out = self._base_stats()
        li = self.lineitem_updates
        out.update(
            {
                "map_entries": float(self.entries),
                "loop_work_total": float(self.loop_work),
                "loop_work_last": float(self.last_loop),
                "loop_work_max": float(self.max_loop),
                "loop_work_per_lineitem_update": self.loop_work / li if li else 0.0,
            }
        )
        return out


class Q17RPAI(_Q17Incremental):
    """docs/vwap/algorithm.md §4.7: per partkey a non-shifting RPAI tree ``quantity -> Σ extendedprice``;
    C(pk) is ``prefix_lt`` at the cutoff fraction·Σqty/count.

    The cutoff is exact without Fractions on the hot path: with every quantity seen so far having at
    most ``s`` decimal places, qty < r  ⇔  qty·10^s < ⌈r·10^s⌉ (qty·10^s is an integer), and
    ⌈r·10^s⌉ = ⌈p·(Σqty·10^s) / (q·count)⌉ is integer arithmetic (cross-multiplication)."""

    strategy = "rpai"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.by_pk: dict[int, RPAITree] = {}  # partkey -> its tree
        self.qcnt: dict[tuple[int, Any], int] = {}  # (partkey, quantity) -> multiplicity
        self.nodes = 0
        self.scale = 0  # max decimal places of any quantity seen
        self._pow = 1  # 10 ** scale

    def _widen(self, qty: Decimal) -> None:
        e = qty.as_tuple().exponent
        if isinstance(e, int) and -e > self.scale:
            self.scale = -e
            self._pow = 10**self.scale

    def cutoff(self, sq: Any, c: int) -> Any:
        """The least key-domain value k with (qty < fraction·sq/c ⇔ qty < k) for every seen quantity."""
        s = self.scale
        m = int(sq) if s == 0 else int(sq * self._pow)  # exact: Σqty has at most s places
        num = self._fp * m
        den = self._fq * c if self.per_count else self._fq
        n = -((-num) // den)
        return n if s == 0 else Decimal(n).scaleb(-s, EXACT)

    def _lineitem(self, pk: int, qty: Any, ext: Any, mult: int) -> None:
        if type(qty) is not int:
            self._widen(qty)
        tree = self.by_pk.get(pk)
        if tree is None:
            tree = self.by_pk[pk] = RPAITree()
        key = (pk, qty)
        had = self.qcnt.get(key, 0)
        n = had + mult
        if n:
            if not had:
                self.nodes += 1
            self.qcnt[key] = n
            tree.add(qty, mult * ext)
        else:
            del self.qcnt[key]
            tree.delete(qty)  # the node's value is exactly this group's Σ extendedprice: now gone
            self.nodes -= 1
        c = self._count(pk, qty, mult)
        if c == 0:
            del self.by_pk[pk]
            return
        self._set_contrib(pk, tree.prefix_lt(self.cutoff(self.sumq[pk], c)))

    def trees(self) -> list[RPAITree]:
        """Every live tree (one per partkey with lineitems), for the engine's height/node gauges."""
        return list(self.by_pk.values())

    def stats(self) -> dict[str, float]:
        out = self._base_stats()
        biggest = max(self.by_pk.values(), key=len, default=None)
        out.update(
            {
                "tree_nodes": float(self.nodes),
                "trees": float(len(self.by_pk)),
                "max_tree_nodes": float(len(biggest)) if biggest is not None else 0.0,
                # black height (one spine, O(log n)): stats() feeds gauges refreshed often
                "max_tree_height": float(black_height(biggest)) if biggest is not None else 0.0,
                "quantity_scale": float(self.scale),
            }
        )
        return out


class Q17aRecompute(Q17Recompute):
    """Q17a literally: the SUM subquery by a full scan."""

    query = "q17a"


class Q17aDBToaster(Q17DBToaster):
    """Q17a by domain extraction: the cutoff is fraction·Σqty."""

    query = "q17a"


class Q17aRPAI(Q17RPAI):
    """Q17a on Q17's per-partkey RPAI trees: the cutoff is fraction·Σqty."""

    query = "q17a"
