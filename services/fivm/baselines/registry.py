"""Strategy name -> baseline maintainer factory (docs/fivm/baselines.md §1).

The engine merges this table into its ``STRATEGIES``; each factory takes the parsed ``Query`` and
refuses, in one line, configurations its strategy does not implement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ivmstream.services.fivm.baselines.dbtoaster import dbt_ring, dbt_scalar
from ivmstream.services.fivm.baselines.first_order import first_order_ring, first_order_scalar
from ivmstream.services.fivm.baselines.reevaluate import (
    factorized_reevaluation,
    flat_reevaluation,
    matrix_reevaluation,
)
from ivmstream.services.fivm.baselines.variants import fact_payloads, list_keys, list_payloads, sql_opt
from ivmstream.services.fivm.query import Query

BASELINES: dict[str, Callable[[Query], Any]] = {
    "1-ivm": first_order_scalar,
    "1-ivm-ring": first_order_ring,
    "dbt": dbt_scalar,
    "dbt-ring": dbt_ring,
    "sql-opt": sql_opt,
    "f-re": factorized_reevaluation,
    "dbt-re": flat_reevaluation,
    "reeval": matrix_reevaluation,
    "list-keys": list_keys,
    "list-payloads": list_payloads,
    "fact-payloads": fact_payloads,
}
