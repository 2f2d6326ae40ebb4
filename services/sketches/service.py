"""Declaration of the sketches service: provenance sketches maintained incrementally (IMP), used to skip data.

One engine per key of ``key_field`` (each key an independent database with its own sketch of the
configured query); every table the query reads arrives on the input topic in commit order
(docs/sketches/algorithm.md §6). The demo sketches a TPC-H Q3-style join with top-k on
``lineitem.l_orderkey`` (safe by S2: the order key is a GROUP BY column) over two small databases, with
lineitem deletes and re-inserts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.sketches.engine import SketchEngine
from ivmstream.services.sketches.options import OPTIONS, relations, validate

DATA = Path(__file__).with_name("data")

DEMO_QUERY = (
    "SELECT l_orderkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority "
    "FROM customer, orders, lineitem "
    "WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey "
    "AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15' "
    "GROUP BY l_orderkey, o_orderdate, o_shippriority "
    "ORDER BY revenue DESC, o_orderdate LIMIT 10"
)
DEMO_CONFIG: dict[str, Any] = {
    "query": DEMO_QUERY,
    "relations": "tpch",
    "partition": {"lineitem": {"column": "l_orderkey", "ranges": 16, "domain": [0, 640]}},
    "key_field": "db",
}
HAVING_CONFIG: dict[str, Any] = {
    "query": "SELECT l_returnflag, SUM(l_quantity) AS q FROM lineitem GROUP BY l_returnflag "
    "HAVING SUM(l_quantity) > 2000",
    "relations": "tpch",
    "partition": {"lineitem": {"column": "l_orderkey", "boundaries": [100, 200, 300, 400, 500]}},
    "monotone_aggregates": True,
    "key_field": "db",
}


SERVICE = ServiceDefinition(
    name="sketches",
    summary="provenance sketches of SQL queries maintained incrementally (IMP) and used to skip data",
    options=OPTIONS,
    reasons={
        "absent-tuple": "a delete of more copies of a row than the table holds",
        "negative-input": "a negative aggregated value while monotone_aggregates is on",
    },
    relations=relations,
    engine=SketchEngine,
    validate=validate,
    demo=DemoWorkload(input=DATA / "tpch_demo.jsonl", config=DEMO_CONFIG, partitions=2),
    workloads=(
        DemoWorkload(
            input=DATA / "tpch_demo.jsonl", config={**HAVING_CONFIG, "strategy": "imp"}, name="having-s4"
        ),
        DemoWorkload(input=DATA / "tpch_demo.jsonl", config={**DEMO_CONFIG, "strategy": "full"}, name="full"),
    ),
    state_version=2,
    batch="ivmstream.services.sketches.batch:JOBS",
    emit="checkpoint",  # the answer is the query over every sketched row: once per checkpoint, not per batch
)
