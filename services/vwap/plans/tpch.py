"""TPC-H Q17, DBToaster's Q17a and Q18 plans, each in three strategies (docs/vwap/algorithm.md §1.2,
§4.7, §4.8, §5).

Q17 (the paper's constants by default; DBToaster's ``query17.sql`` uses 'MED BOX')::

    SELECT SUM(l.extendedprice) / 7.0 AS avg_yearly FROM lineitem l, part p
    WHERE p.partkey = l.partkey AND p.brand = :brand AND p.container = :container
      AND l.quantity < (SELECT :fraction * AVG(l2.quantity) FROM lineitem l2 WHERE l2.partkey = p.partkey)

Q17a (DBToaster's ``query17a.sql``: the same correlation with a SUM, no part selection; fraction 1/200)::

    SELECT SUM(l.extendedprice) FROM lineitem l, part p WHERE p.partkey = l.partkey
      AND l.quantity < :fraction * (SELECT SUM(l2.quantity) FROM lineitem l2 WHERE l2.partkey = p.partkey)

Both run on the same plans: the cutoff of a partkey is fraction·Σqty/count for Q17's AVG and
fraction·Σqty for Q17a's SUM.

Q18 (DBToaster's ``query18.sql``: threshold 100, strict ``>``)::

    SELECT c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice, SUM(l.quantity)
    FROM customer c, orders o, lineitem l
    WHERE o.orderkey IN (SELECT l2.orderkey FROM lineitem l2 GROUP BY l2.orderkey
                         HAVING SUM(l2.quantity) > :threshold)
      AND c.custkey = o.custkey AND o.orderkey = l.orderkey
    GROUP BY c.name, c.custkey, o.orderkey, o.orderdate, o.totalprice

Strategies:

- ``recompute``: the SQL evaluated literally with nested loops over the live bag, in ``Fraction``
  arithmetic where the query divides; the test oracle (§5.1).
- ``dbtoaster`` (§5.2): every sub-aggregate in a hash map updated by first-order deltas. Q17 re-evaluates
  the updated partkey's contribution by looping over its distinct quantities (domain extraction);
  Q18 is fully incremental: join aggregates per output group, moved by delta rules.
- ``rpai`` (§4.7, §4.8): Q17 keeps per partkey a non-shifting RPAI tree ``quantity -> Σ extendedprice``
  and (Σ quantity, count); the partkey's contribution is one ``prefix_lt`` below the exact cutoff, and the
  global sum moves by ``part multiplicity * (C_new - C_old)``. Q18 keeps orderkey-level hash maps and
  materializes each order's output rows when it is touched.

Bag semantics throughout: a tuple contributes with its multiplicity, joins multiply multiplicities, and
``mult`` may be any non-zero int (deletes only ever remove present tuples: the engine checks). All
arithmetic is exact (ints and Decimals, run under ``exact.exact_context()``); the empty SUM is 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ivmstream.sdk import TPCH_TABLES
from ivmstream.services.vwap import catalog
from ivmstream.services.vwap.catalog import TPCH_QUERIES
from ivmstream.services.vwap.exact import EXACT, decimal_quotient, to_json
from ivmstream.services.vwap.plans.base import Plan, Row
from ivmstream.services.vwap.trees.rpai import RPAITree, black_height

__all__ = [
    "Q17RPAI",
    "Q18RPAI",
    "STRATEGIES",
    "TPCH_DEFAULTS",
    "Q17DBToaster",
    "Q17Recompute",
    "Q17aDBToaster",
    "Q17aRPAI",
    "Q17aRecompute",
    "Q18DBToaster",
    "Q18Recompute",
    "make_tpch_plan",
    "tpch_params",
]

TPCH_DEFAULTS: dict[str, dict[str, Any]] = {q: catalog.sql_defaults(q) for q in TPCH_QUERIES}  # the catalog's
STRATEGIES = ("rpai", "dbtoaster", "recompute")


def tpch_params(query: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults overlaid with ``params``, validated: Q17 brand/container strings and a Fraction
    ``fraction``; Q18 ``threshold`` as an int, or a Fraction when it is not integral."""
    return catalog.resolve_params(query, params, TPCH_QUERIES, "TPC-H")


def _zero_if_empty(x: Any) -> Any:
    return x if x else 0


def _q17_result(total: Any) -> dict[str, Any]:
    return {"avg_yearly": decimal_quotient(total, 7), "sum_extendedprice": to_json(_zero_if_empty(total))}


def _q17a_result(total: Any) -> dict[str, Any]:
    return {"sum_extendedprice": to_json(_zero_if_empty(total))}


def _q18_result(groups: list[tuple[tuple[Any, ...], Any]]) -> dict[str, Any]:
    """``groups``: (orderkey, custkey, name, orderdate, totalprice) -> Σ quantity, sorted by key."""
    return {
        "q18": [
            [name, to_json(ck), to_json(ok), od, to_json(tp), to_json(_zero_if_empty(s))]
            for (ok, ck, name, od, tp), s in groups
        ]
    }


def _columns(rels: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    return {r: tuple(c for c, _ in TPCH_TABLES[r]) for r in rels}


def _bag_update(
    bags: dict[str, dict[tuple[Any, ...], int]],
    cols: Mapping[str, tuple[str, ...]],
    rel: str,
    row: Row,
    mult: int,
) -> bool:
    """The recompute plans' live bags: ``row`` as a column tuple moved by ``mult``; False when the
    plan does not read ``rel``."""
    bag = bags.get(rel)
    if bag is None:
        return False
    t = tuple(row.get(c) for c in cols[rel])
    n = bag.get(t, 0) + mult
    if n:
        bag[t] = n
    else:
        del bag[t]
    return True


def _group_sort_key(item: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    return item[0]


# ==================================================================================================
# Q17
# ==================================================================================================


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


# ==================================================================================================
# Q18
# ==================================================================================================


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


class Q17aRecompute(Q17Recompute):
    """Q17a literally: the SUM subquery by a full scan."""

    query = "q17a"


class Q17aDBToaster(Q17DBToaster):
    """Q17a by domain extraction: the cutoff is fraction·Σqty."""

    query = "q17a"


class Q17aRPAI(Q17RPAI):
    """Q17a on Q17's per-partkey RPAI trees: the cutoff is fraction·Σqty."""

    query = "q17a"


_PLANS: dict[tuple[str, str], type] = {
    ("q17", "rpai"): Q17RPAI,
    ("q17", "dbtoaster"): Q17DBToaster,
    ("q17", "recompute"): Q17Recompute,
    ("q17a", "rpai"): Q17aRPAI,
    ("q17a", "dbtoaster"): Q17aDBToaster,
    ("q17a", "recompute"): Q17aRecompute,
    ("q18", "rpai"): Q18RPAI,
    ("q18", "dbtoaster"): Q18DBToaster,
    ("q18", "recompute"): Q18Recompute,
}


def make_tpch_plan(query: str, strategy: str, params: Mapping[str, Any] | None = None) -> Plan:
    """A Q17/Q18 plan; ``params`` overlay ``TPCH_DEFAULTS[query]`` (ValueError for unknown names)."""
    if query not in TPCH_QUERIES:
        raise ValueError(f"unknown TPC-H query {query!r} (known: {', '.join(TPCH_QUERIES)})")
    cls = _PLANS.get((query, strategy))
    if cls is None:
        raise ValueError(f"unknown strategy {strategy!r} for {query} (known: {', '.join(STRATEGIES)})")
    return cls(params)
