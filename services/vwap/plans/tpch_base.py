"""What the TPC-H plans (``ivmstream.services.vwap.plans.tpch``) share: their parameters, the
recompute plans' live bags, the empty SUM as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.sdk import TPCH_TABLES
from ivmstream.services.vwap import catalog
from ivmstream.services.vwap.catalog import TPCH_QUERIES
from ivmstream.services.vwap.plans.base import Row

TPCH_DEFAULTS: dict[str, dict[str, Any]] = {q: catalog.sql_defaults(q) for q in TPCH_QUERIES}  # the catalog's


def tpch_params(query: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults overlaid with ``params``, validated: Q17 brand/container strings and a Fraction
    ``fraction``; Q18 ``threshold`` as an int, or a Fraction when it is not integral."""
    return catalog.resolve_params(query, params, TPCH_QUERIES, "TPC-H")


def _zero_if_empty(x: Any) -> Any:
    return x if x else 0


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
