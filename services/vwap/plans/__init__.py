"""Query plans, one module per query family and strategy (docs/vwap/algorithm.md §4, §5).

``finance_*`` hold the order-book queries and Ex. 2.1 (``rpai``, ``dbtoaster``, ``recompute``, and
``crosscheck`` inside ``finance_rpai``); ``tpch`` holds Q17 and Q18 in three strategies. ``make_plan``
picks one; the baselines are imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.vwap.catalog import RPAI_ONLY_PARAMS, STRATEGIES, TPCH_QUERIES


def make_plan(query: str, strategy: str, params: Mapping[str, Any]) -> Any:
    """The plan object for a query and strategy (imports are lazy: baselines load only when asked)."""
    if query in TPCH_QUERIES:
        if strategy == "crosscheck":
            raise EngineError(f"strategy 'crosscheck' is not defined for {query}")
        from ivmstream.services.vwap.plans.tpch import make_tpch_plan

        return make_tpch_plan(query, strategy, params)
    if strategy == "rpai":
        from ivmstream.services.vwap.plans.finance_rpai import make_rpai_plan

        return make_rpai_plan(query, params)
    if strategy == "crosscheck":
        from ivmstream.services.vwap.plans.finance_native import make_plan as make_crosscheck_plan

        return make_crosscheck_plan(query, params)
    # ``brokers`` only bounds the RPAI payload vector; the baselines group by whatever ids they see.
    sql_params = {k: v for k, v in params.items() if k not in RPAI_ONLY_PARAMS}
    if strategy == "dbtoaster":
        from ivmstream.services.vwap.plans.finance_dbtoaster import make_plan as make_dbt

        return make_dbt(query, sql_params)
    if strategy == "recompute":
        from ivmstream.services.vwap.plans.finance_recompute import make_plan as make_rec

        return make_rec(query, sql_params)
    raise EngineError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
