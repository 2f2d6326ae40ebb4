"""Declaration of the reservoir service: a uniform sample of a join's results, kept by RSJoin
(docs/reservoir/algorithm.md).

Each ``key_field`` value is an independent query instance; within one the events are one ordered
stream, since the sample depends on arrival order, which the log fixes. The demo samples walks of
length 3 (line-3 over one edge relation, read by three aliases) in two small bundled graphs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.options import OPTIONS, relations, validate

DATA = Path(__file__).with_name("data")

LINE3_CONFIG: dict[str, Any] = {
    "relations": {
        "G1": {"a": "int", "b": "int"},
        "G2": {"b": "int", "c": "int"},
        "G3": {"c": "int", "d": "int"},
    },
    "aliases": {"G1": "edges", "G2": "edges", "G3": "edges"},
    "base_columns": {"edges": ["src", "dst"]},
    "k": 25,
    "seed": 42,
    "predicate": "a != c and b != d",  # walks that do not step straight back
    "key_field": "graph",
}

SERVICE = ServiceDefinition(
    name="reservoir",
    summary="a uniform reservoir sample of the results of an acyclic (or decomposed cyclic) join, RSJoin",
    options=OPTIONS,
    reasons={
        "set-semantics": "a delta other than +1 or -1 (relations are sets)",
        "duplicate-tuple": "an insert of a tuple the relation already holds",
        "key-violation": "an insert that breaks a declared key of its relation",
        "append-only": "a delete while append_only is on",
        "absent-tuple": "a delete of a tuple the relation does not hold",
    },
    relations=relations,
    engine=ReservoirEngine,
    validate=validate,
    demo=DemoWorkload(input=DATA / "graph.jsonl", config=LINE3_CONFIG, partitions=2),
    state_version=3,  # 3: node tuples with arrival numbers, deletes in place (docs/reservoir/algorithm.md §9)
    batch="ivmstream.services.reservoir.batch:JOBS",  # Spark jobs: docs/reservoir/algorithm.md §8
)
