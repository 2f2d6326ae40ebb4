"""Strategy ``recompute``: every finance query evaluated literally as its SQL.

The queries are those of docs/vwap/algorithm.md §1.2 and §1.3, the strategy that of §5.1. This is
the test oracle of every other strategy, so each query is one function that reads like its SQL: nested
loops over the live bag, every subquery re-scanned for every outer tuple, nothing hoisted or shared.
Relations are bags (``tuple -> multiplicity``); a distinct tuple with multiplicity m stands for m
identical rows, so it contributes ``value * m`` to every SUM, inner sums included, and a pair of tuples
from a cross product contributes ``value * m1 * m2``.

Arithmetic is exact: column sums stay ints or Decimals (evaluated under ``exact.exact_context()``),
and the query constants (``fraction``, e.g. 0.25) are ``Fraction``s compared with ``Fraction(sum)``, so
no float ever appears. An empty SUM is 0 (DBToaster's convention, §1.5); MST reports a broker iff
its GROUP BY group is non-empty (at least one qualifying (bid, ask) pair), whatever its sum.

Speed is irrelevant here: VWAP is O(L²) per result, NQ2 O(L³), MST O(L_b·L_a·(L_b + L_a)) for L live
distinct tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any, NamedTuple

from ivmstream.services.vwap import catalog
from ivmstream.services.vwap.exact import Number, exact_context, to_json
from ivmstream.services.vwap.plans.base import Plan, Row

QUERIES = catalog.FINANCE_QUERIES
DEFAULTS: dict[str, dict[str, Any]] = {q: catalog.sql_defaults(q) for q in QUERIES}  # the catalog's
# The relations each query reads; updates to any other relation are ignored.
RELATIONS: dict[str, tuple[str, ...]] = {q: catalog.QUERIES[q].reads for q in QUERIES}


def resolve_params(query: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The query's DEFAULTS overridden by ``params``: ``fraction`` as a Fraction, ``variant`` checked."""
    return catalog.resolve_params(query, params, QUERIES, "finance")


# ---------------------------------------------------------------------------------------------------
# Bags


class Book(NamedTuple):
    """A bids or asks tuple."""

    t: Any
    id: Any
    broker_id: Any
    volume: Number
    price: Number


class RTuple(NamedTuple):
    """A tuple of Ex. 2.1's R(A, B)."""

    a: Number
    b: Number


Bag = dict[Any, int]  # distinct tuple -> multiplicity > 0


def as_tuple(rel: str, row: Row) -> Book | RTuple:
    if rel == "R":
        return RTuple(row["a"], row["b"])
    return Book(row["t"], row["id"], row["broker_id"], row["volume"], row["price"])


def SUM(terms: Iterable[Number]) -> Number:
    """SQL SUM with the empty sum reported as 0 (exact: ints and Decimals under the exact context)."""
    return sum(terms, 0)


def q(x: Number) -> Fraction:
    """The exact rational value of an int or Decimal, for comparing with ``fraction * ...``."""
    return Fraction(x)


# ---------------------------------------------------------------------------------------------------
# The queries, one function each, literally as in docs/vwap/algorithm.md §1.2 and §1.3.
# ``f`` is the query's ``fraction``.


def ex21(R: Bag, f: Fraction) -> Number:
    """SELECT SUM(r.A * r.B) FROM R r
    WHERE f * (SELECT SUM(r1.B) FROM R r1) = (SELECT SUM(r2.B) FROM R r2 WHERE r2.A = r.A)"""
    return SUM(
        r.a * r.b * m
        for r, m in R.items()
        if f * q(SUM(r1.b * m1 for r1, m1 in R.items()))
        == q(SUM(r2.b * m2 for r2, m2 in R.items() if r2.a == r.a))
    )


def vwap(bids: Bag, f: Fraction) -> Number:
    """DBToaster's vwap.sql:
    SELECT SUM(b1.price * b1.volume) FROM bids b1
    WHERE f * (SELECT SUM(b3.volume) FROM bids b3)
        > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price)
    """
    return SUM(
        b1.price * b1.volume * m1
        for b1, m1 in bids.items()
        if f * q(SUM(b3.volume * m3 for b3, m3 in bids.items()))
        > q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price > b1.price))
    )


def vwap_paper(bids: Bag, f: Fraction) -> Number:
    """The paper's Ex. 2.2:
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1)
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f * q(SUM(b1.volume * m1 for b1, m1 in bids.items()))
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price <= b.price))
    )


def mst(bids: Bag, asks: Bag, f: Fraction) -> dict[Any, Number]:
    """DBToaster's missedtrades.sql:
    SELECT b.broker_id, SUM((a.price * a.volume) + (-1 * b.price * b.volume)) AS mst
    FROM bids b, asks a
    WHERE f * (SELECT SUM(a1.volume) FROM asks a1)
            > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.price > a.price)
      AND f * (SELECT SUM(b1.volume) FROM bids b1)
            > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b.price)
    GROUP BY b.broker_id

    Returns broker_id -> sum for exactly the groups GROUP BY produces (a group exists once a row reaches it).
    """
    groups: dict[Any, Number] = {}
    for b, mb in bids.items():
        for a, ma in asks.items():
            where_a = f * q(SUM(a1.volume * m1 for a1, m1 in asks.items())) > q(
                SUM(a2.volume * m2 for a2, m2 in asks.items() if a2.price > a.price)
            )
            where_b = f * q(SUM(b1.volume * m1 for b1, m1 in bids.items())) > q(
                SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price > b.price)
            )
            if where_a and where_b:
                row_value = ((a.price * a.volume) + (-1 * b.price * b.volume)) * (mb * ma)
                groups[b.broker_id] = groups.get(b.broker_id, 0) + row_value
    return groups


def psp(bids: Bag, asks: Bag, f: Fraction) -> Number:
    """DBToaster's pricespread.sql:
    SELECT SUM(a.price + (-1 * b.price)) AS psp FROM bids b, asks a
    WHERE (b.volume > f * (SELECT SUM(b1.volume) FROM bids b1))
      AND (a.volume > f * (SELECT SUM(a1.volume) FROM asks a1))
    """
    return SUM(
        (a.price + (-1 * b.price)) * (mb * ma)
        for b, mb in bids.items()
        for a, ma in asks.items()
        if q(b.volume) > f * q(SUM(b1.volume * m1 for b1, m1 in bids.items()))
        and q(a.volume) > f * q(SUM(a1.volume * m1 for a1, m1 in asks.items()))
    )


def sq1a(bids: Bag, f: Fraction) -> Number:
    """SQ1, default reconstruction (docs/vwap/algorithm.md §1.3):
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1 WHERE b1.broker_id = b.broker_id)
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f * q(SUM(b1.volume * m1 for b1, m1 in bids.items() if b1.broker_id == b.broker_id))
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price <= b.price))
    )


def sq1b(bids: Bag, f: Fraction) -> Number:
    """SQ1, alternative reconstruction (docs/vwap/algorithm.md §1.3):
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1 WHERE b1.price >= b.price)
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f * q(SUM(b1.volume * m1 for b1, m1 in bids.items() if b1.price >= b.price))
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price <= b.price))
    )


def sq2(bids: Bag, f: Fraction) -> Number:
    """SQ2 reconstruction (docs/vwap/algorithm.md §1.3):
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1)
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price + b2.volume <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f * q(SUM(b1.volume * m1 for b1, m1 in bids.items()))
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price + b2.volume <= b.price))
    )


def nq1(bids: Bag, f: Fraction) -> Number:
    """NQ1 reconstruction (docs/vwap/algorithm.md §1.3):
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1
               WHERE f * (SELECT SUM(b3.volume) FROM bids b3)
                     < (SELECT SUM(b4.volume) FROM bids b4 WHERE b4.price <= b1.price))
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f
        * q(
            SUM(
                b1.volume * m1
                for b1, m1 in bids.items()
                if f * q(SUM(b3.volume * m3 for b3, m3 in bids.items()))
                < q(SUM(b4.volume * m4 for b4, m4 in bids.items() if b4.price <= b1.price))
            )
        )
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price <= b.price))
    )


def nq2(bids: Bag, f: Fraction) -> Number:
    """NQ2 reconstruction (docs/vwap/algorithm.md §1.3): NQ1 with the lowest level also correlated
    with the outer query:
    SELECT SUM(b.price * b.volume) FROM bids b
    WHERE f * (SELECT SUM(b1.volume) FROM bids b1
               WHERE f * (SELECT SUM(b3.volume) FROM bids b3)
                     < (SELECT SUM(b4.volume) FROM bids b4
                        WHERE b4.price <= b1.price AND b4.price <= b.price))
        < (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price <= b.price)
    """
    return SUM(
        b.price * b.volume * m
        for b, m in bids.items()
        if f
        * q(
            SUM(
                b1.volume * m1
                for b1, m1 in bids.items()
                if f * q(SUM(b3.volume * m3 for b3, m3 in bids.items()))
                < q(
                    SUM(
                        b4.volume * m4
                        for b4, m4 in bids.items()
                        if b4.price <= b1.price and b4.price <= b.price
                    )
                )
            )
        )
        < q(SUM(b2.volume * m2 for b2, m2 in bids.items() if b2.price <= b.price))
    )


# ---------------------------------------------------------------------------------------------------
# The plan


def _scalar(name: str, fn: Callable[..., Number], *rels: str) -> Callable[[RecomputePlan], Any]:
    def evaluate(plan: RecomputePlan) -> Any:
        return {name: to_json(fn(*(plan.bags[r] for r in rels), plan.fraction))}

    return evaluate


def _mst(plan: RecomputePlan) -> Any:
    groups = mst(plan.bags["bids"], plan.bags["asks"], plan.fraction)
    return {"mst": {str(g): to_json(v) for g, v in sorted(groups.items(), key=lambda gv: str(gv[0]))}}


_EVALUATORS: dict[str, Callable[[RecomputePlan], Any]] = {
    "vwap": _scalar("vwap", vwap, "bids"),
    "vwap-paper": _scalar("vwap", vwap_paper, "bids"),
    "ex21": _scalar("ex21", ex21, "R"),
    "mst": _mst,
    "psp": _scalar("psp", psp, "bids", "asks"),
    "sq1a": _scalar("sq1", sq1a, "bids"),
    "sq1b": _scalar("sq1", sq1b, "bids"),
    "sq2": _scalar("sq2", sq2, "bids"),
    "nq1": _scalar("nq1", nq1, "bids"),
    "nq2": _scalar("nq2", nq2, "bids"),
}


class RecomputePlan:
    """Keeps the live bag of each relation the query reads; ``result()`` evaluates the SQL on it."""

    def __init__(self, query: str, params: Mapping[str, Any] | None = None) -> None:
        self.query = query
        self.params = resolve_params(query, params)
        self.fraction: Fraction = self.params["fraction"]
        self.bags: dict[str, Bag] = {rel: {} for rel in RELATIONS[query]}
        self._evaluate = _EVALUATORS[query + self.params["variant"] if query == "sq1" else query]
        self.evaluations = 0

    def update(self, rel: str, row: Row, mult: int) -> None:
        bag = self.bags.get(rel)
        if bag is None:
            return  # a relation this query does not read
        key = as_tuple(rel, row)
        m = bag.get(key, 0) + mult
        if m < 0:
            raise ValueError(f"delete of {-mult} copies of a {rel} tuple with {m - mult} live: {key}")
        if m:
            bag[key] = m
        else:
            del bag[key]

    def result(self) -> Any:
        """Evaluates the SQL from scratch on every call (nothing cached: this is the oracle)."""
        self.evaluations += 1
        with exact_context():
            return self._evaluate(self)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {"evaluations": float(self.evaluations)}
        for rel, bag in self.bags.items():
            out[f"{rel}_distinct"] = float(len(bag))
            out[f"{rel}_rows"] = float(sum(bag.values()))
        return out


def make_plan(query: str, params: Mapping[str, Any] | None = None) -> Plan:
    return RecomputePlan(query, params)


__all__ = [
    "DEFAULTS",
    "QUERIES",
    "RELATIONS",
    "Book",
    "RTuple",
    "RecomputePlan",
    "make_plan",
    "resolve_params",
]
