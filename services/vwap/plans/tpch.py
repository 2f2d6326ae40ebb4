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
from typing import Any

from ivmstream.services.vwap.catalog import TPCH_QUERIES
from ivmstream.services.vwap.plans.base import Plan
from ivmstream.services.vwap.plans.tpch_base import TPCH_DEFAULTS, tpch_params
from ivmstream.services.vwap.plans.tpch_q17 import (
    Q17RPAI,
    Q17aDBToaster,
    Q17aRecompute,
    Q17aRPAI,
    Q17DBToaster,
    Q17Recompute,
)
from ivmstream.services.vwap.plans.tpch_q18 import Q18RPAI, Q18DBToaster, Q18Recompute

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

STRATEGIES = ("rpai", "dbtoaster", "recompute")


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
