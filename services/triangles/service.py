"""Declaration of the triangles service: exact triangle counts under edge inserts and deletes (IVM^ε)."""

from __future__ import annotations

from pathlib import Path

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.triangles.engine import make_engine
from ivmstream.services.triangles.options import OPTIONS, relations, validate

DATA = Path(__file__).with_name("data")

SERVICE = ServiceDefinition(
    name="triangles",
    summary="exact triangle counts under inserts and deletes, IVM^eps heavy/light partitioning",
    options=OPTIONS,
    reasons={
        "bad-multiplicity": "an edge event's delta is not +1 or -1",
        "self-loop": "an edge from a node to itself",
        "duplicate-edge": "an insert of an edge that is already present",
        "absent-edge": "a delete of an edge that is not present",
        "id-out-of-range": "a node id outside int64",
    },
    relations=relations,
    engine=make_engine,
    validate=validate,
    demo=DemoWorkload(
        input=DATA / "sample.jsonl",
        config={"mode": "graph", "strategy": "ivm-eps", "epsilon": "1/2", "key_field": "graph"},
        partitions=2,
    ),
    # strategy auto switching plans (docs/triangles/algorithm.md §4.7): toggles of an edge over a hub
    # move it from first-order to IVM^eps, the sparse churn after them back; the plan and the decision
    # state must survive restores and replays like any other state
    workloads=(
        DemoWorkload(
            input=DATA / "sample_auto.jsonl",
            config={"mode": "graph", "strategy": "auto", "key_field": "graph"},
            partitions=1,
            name="auto-graph",
        ),
    ),
    state_version=2,  # 2: graph mode stores each undirected edge once; the heavy rows are their own map
    batch="ivmstream.services.triangles.batch:JOBS",
    # the relations each mode reads; id_type str makes every column str
    fixed_relations=({"mode": "graph"}, {"mode": "relations"}),
)
