"""TPC-H Q18 in three strategies: recompute, dbtoaster (join aggregates per output group moved by delta
rules) and rpai (orderkey-level maps, an order's rows materialized when it is touched);
``ivmstream.services.vwap.plans.tpch`` says what it computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ivmstream.services.vwap.exact import to_json
from ivmstream.services.vwap.plans.base import Row
from ivmstream.services.vwap.plans.tpch_base import (
    _bag_update,
    _columns,
    _group_sort_key,
    _zero_if_empty,
    tpch_params,
)


def _q18_result(groups: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    """``groups``: (orderkey, custkey, name, orderdate, totalprice) -> Σ quantity, sorted by key."""
    return {
        "q18": [
            [name, to_json(ck), to_json(ok), od, to_json(tp), to_json(_zero_if_empty(s))]
            for (ok, ck, name, od, tp), s in groups
        ]
    }


class _Q18Base:
    query = "q18"
    strategy = ""

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        p = tpch_params("q18", params)
        self.threshold: int | Fraction = p["threshold"]
        self.updates = {"lineitem": 0, "orders": 0, "customer": 0}
        self._cache: dict[str, Any] | None = None

    def result(self) -> dict[str, Any]:
        if self._cache is None:
            self._cache = _q18_result(self._groups())
        return self._cache

    def _groups(self) -> list[tuple[tuple[Any, ...], Any]]:
        raise NotImplementedError


class Q18Recompute(_Q18Base):
    """The SQL evaluated literally: the IN subquery by a GROUP BY scan, then customer x orders x lineitem."""

    strategy = "recompute"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        rels = ("customer", "orders", "lineitem")
        self._cols = _columns(rels)
        self.bag: dict[str, dict[tuple[Any, ...], int]] = {r: {} for r in rels}
        c, o, li = self._cols["customer"], self._cols["orders"], self._cols["lineitem"]
        self._c = (c.index("custkey"), c.index("name"))
        self._o = (o.index("orderkey"), o.index("custkey"), o.index("orderdate"), o.index("totalprice"))
        self._l = (li.index("orderkey"), li.index("quantity"))
        self.last_work = 0

    def update(self, rel: str, row: Row, mult: int) -> None:
        if _bag_update(self.bag, self._cols, rel, row, mult):
            self.updates[rel] += 1
            self._cache = None

    def _groups(self) -> list[tuple[tuple[Any, ...], Any]]:
        c_ck, c_name = self._c
        o_ok, o_ck, o_od, o_tp = self._o
        l_ok, l_qty = self._l
        lineitems = self.bag["lineitem"]
        work = 0
        # SELECT l2.orderkey FROM lineitem l2 GROUP BY l2.orderkey HAVING SUM(l2.quantity) > threshold
        sums: dict[Any, Any] = {}
        for li, m in lineitems.items():
            work += 1
            sums[li[l_ok]] = sums.get(li[l_ok], 0) + m * li[l_qty]
        in_set = {ok for ok, s in sums.items() if s > self.threshold}
        groups: dict[tuple[Any, ...], Any] = {}
        for c, mc in self.bag["customer"].items():
            for o, mo in self.bag["orders"].items():
                work += 1
                if o[o_ck] != c[c_ck] or o[o_ok] not in in_set:
                    continue
                for li, ml in lineitems.items():
                    work += 1
                    if li[l_ok] != o[o_ok]:
                        continue
                    g = (o[o_ok], c[c_ck], c[c_name], o[o_od], o[o_tp])
                    groups[g] = groups.get(g, 0) + mc * mo * ml * li[l_qty]
        self.last_work = work
        return sorted(groups.items(), key=_group_sort_key)

    def stats(self) -> dict[str, float]:
        out = {f"{r}_updates": float(n) for r, n in self.updates.items()}
        out.update({f"live_{r}": float(sum(b.values())) for r, b in self.bag.items()})
        out["last_result_loop_work"] = float(self.last_work)
        return out


class _Q18Maps(_Q18Base):
    """The first-order maps both incremental Q18 plans keep.

    qty[ok] = Σ quantity and lcnt[ok] = Σ multiplicity of ok's lineitems (the IN subquery's GROUP BY);
    om[ok] = (custkey, orderdate, totalprice) -> multiplicity of ok's orders; cm[ck] = name ->
    multiplicity of ck's customers; obyc[ck] = orderkey -> how many om[ok] entries name ck."""

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.qty: dict[Any, Any] = {}
        self.lcnt: dict[Any, int] = {}
        self.om: dict[Any, dict[tuple[Any, Any, Any], int]] = {}
        self.cm: dict[Any, dict[Any, int]] = {}
        self.obyc: dict[Any, dict[Any, int]] = {}

    def _add_lineitem(self, ok: Any, qty: Any, mult: int) -> None:
        c = self.lcnt.get(ok, 0) + mult
        if c:
            self.lcnt[ok] = c
            self.qty[ok] = self.qty.get(ok, 0) + mult * qty
        else:
            del self.lcnt[ok]
            del self.qty[ok]

    def _add_order(self, ok: Any, ck: Any, od: Any, tp: Any, mult: int) -> None:
        d = self.om.get(ok)
        if d is None:
            d = self.om[ok] = {}
        key = (ck, od, tp)
        n = d.get(key, 0) + mult
        refs = self.obyc.get(ck)
        if refs is None:
            refs = self.obyc[ck] = {}
        if n == 0:
            del d[key]
            if not d:
                del self.om[ok]
            r = refs[ok] - 1
            if r:
                refs[ok] = r
            else:
                del refs[ok]
                if not refs:
                    del self.obyc[ck]
        else:
            if key not in d:
                refs[ok] = refs.get(ok, 0) + 1
            d[key] = n

    def _add_customer(self, ck: Any, name: Any, mult: int) -> None:
        d = self.cm.get(ck)
        if d is None:
            d = self.cm[ck] = {}
        n = d.get(name, 0) + mult
        if n:
            d[name] = n
        else:
            del d[name]
            if not d:
                del self.cm[ck]

    def _qualifies(self, ok: Any) -> bool:
        return ok in self.lcnt and self.qty[ok] > self.threshold

    def _map_stats(self) -> dict[str, float]:
        out = {f"{r}_updates": float(n) for r, n in self.updates.items()}
        out.update(
            {
                "orderkeys_with_lineitems": float(len(self.lcnt)),
                "orderkeys_with_orders": float(len(self.om)),
                "custkeys": float(len(self.cm)),
            }
        )
        return out


class Q18DBToaster(_Q18Maps):
    """Fully incremental (docs/vwap/algorithm.md §5.2): per output group g = (orderkey, custkey, name,
    orderdate, totalprice) the join aggregates js[g] = Σ quantity and jc[g] = Σ multiplicity over
    customer ⋈ orders ⋈ lineitem, moved by first-order delta rules; the IN predicate filters groups by
    qty[orderkey]."""

    strategy = "dbtoaster"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.js: dict[tuple[Any, ...], Any] = {}
        self.jc: dict[tuple[Any, ...], int] = {}
        self.jbyok: dict[Any, set[tuple[Any, ...]]] = {}
        self.qual: set[Any] = set()
        self.delta_work = 0

    def _j_add(self, g: tuple[Any, ...], ds: Any, dc: int) -> None:
        self.delta_work += 1
        c = self.jc.get(g, 0) + dc
        if c:
            if g not in self.jc:
                s = self.jbyok.get(g[0])
                if s is None:
                    s = self.jbyok[g[0]] = set()
                s.add(g)
            self.jc[g] = c
            self.js[g] = self.js.get(g, 0) + ds
        else:
            del self.jc[g]
            del self.js[g]
            s = self.jbyok[g[0]]
            s.discard(g)
            if not s:
                del self.jbyok[g[0]]

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel == "lineitem":
            ok = row["orderkey"]
            qty = row["quantity"]
            orders = self.om.get(ok)
            if orders:
                for (ck, od, tp), mo in orders.items():
                    names = self.cm.get(ck)
                    if names:
                        for name, mc in names.items():
                            k = mo * mc * mult
                            self._j_add((ok, ck, name, od, tp), k * qty, k)
            self._add_lineitem(ok, qty, mult)
            if self._qualifies(ok):
                self.qual.add(ok)
            else:
                self.qual.discard(ok)
        elif rel == "orders":
            ok = row["orderkey"]
            ck = row["custkey"]
            od = row["orderdate"]
            tp = row["totalprice"]
            lc = self.lcnt.get(ok)
            names = self.cm.get(ck)
            if lc and names:
                lq = self.qty[ok]
                for name, mc in names.items():
                    k = mult * mc
                    self._j_add((ok, ck, name, od, tp), k * lq, k * lc)
            self._add_order(ok, ck, od, tp, mult)
        elif rel == "customer":
            ck = row["custkey"]
            name = row["name"]
            refs = self.obyc.get(ck)
            if refs:
                for ok in refs:
                    lc = self.lcnt.get(ok)
                    if not lc:
                        continue
                    lq = self.qty[ok]
                    for (ck2, od, tp), mo in self.om[ok].items():
                        if ck2 == ck:
                            k = mult * mo
                            self._j_add((ok, ck, name, od, tp), k * lq, k * lc)
            self._add_customer(ck, name, mult)
        else:
            return
        self.updates[rel] += 1
        self._cache = None

    def _groups(self) -> list[tuple[tuple[Any, ...], Any]]:
        js = self.js
        gs = [g for ok in self.qual for g in self.jbyok.get(ok, ())]
        gs.sort()
        return [(g, js[g]) for g in gs]

    def stats(self) -> dict[str, float]:
        out = self._map_stats()
        out.update(
            {
                "join_groups": float(len(self.jc)),
                "qualifying_orderkeys": float(len(self.qual)),
                "delta_work_total": float(self.delta_work),
            }
        )
        return out


class Q18RPAI(_Q18Maps):
    """docs/vwap/algorithm.md §4.8: the hash maps plus, per qualifying orderkey, its materialized output
    rows, rebuilt in O(rows of that order) whenever the order, its lineitems or its customer change."""

    strategy = "rpai"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        self.rows: dict[Any, list[tuple[tuple[Any, ...], Any]]] = {}
        self.refreshes = 0

    def _refresh(self, ok: Any) -> None:
        self.refreshes += 1
        lc = self.lcnt.get(ok)
        orders = self.om.get(ok)
        if lc and orders and self.qty[ok] > self.threshold:
            lq = self.qty[ok]
            out = []
            for (ck, od, tp), mo in orders.items():
                names = self.cm.get(ck)
                if names:
                    for name, mc in names.items():
                        out.append(((ok, ck, name, od, tp), mo * mc * lq))
            if out:
                self.rows[ok] = out
                return
        self.rows.pop(ok, None)

    def update(self, rel: str, row: Row, mult: int) -> None:
        if rel == "lineitem":
            ok = row["orderkey"]
            self._add_lineitem(ok, row["quantity"], mult)
            self._refresh(ok)
        elif rel == "orders":
            ok = row["orderkey"]
            self._add_order(ok, row["custkey"], row["orderdate"], row["totalprice"], mult)
            self._refresh(ok)
        elif rel == "customer":
            ck = row["custkey"]
            self._add_customer(ck, row["name"], mult)
            refs = self.obyc.get(ck)
            if refs:
                for ok in refs:
                    self._refresh(ok)
        else:
            return
        self.updates[rel] += 1
        self._cache = None

    def _groups(self) -> list[tuple[tuple[Any, ...], Any]]:
        out = [item for rows in self.rows.values() for item in rows]
        out.sort(key=_group_sort_key)
        return out

    def stats(self) -> dict[str, float]:
        out = self._map_stats()
        out.update(
            {
                "qualifying_orderkeys": float(len(self.rows)),
                "output_groups": float(sum(len(r) for r in self.rows.values())),
                "order_refreshes": float(self.refreshes),
            }
        )
        return out
