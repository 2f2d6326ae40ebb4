"""Declaration of the vwap service: correlated nested aggregates over an order book with RPAI trees."""

from __future__ import annotations

from pathlib import Path

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import make_engine
from ivmstream.services.vwap.options import OPTIONS, relations, validate

DATA = Path(__file__).with_name("data")

SERVICE = ServiceDefinition(
    name="vwap",
    summary="VWAP-style correlated nested aggregates, O(log D) per update with RPAI trees",
    options=OPTIONS,
    reasons={
        "absent-tuple": "a delete of more copies of an order than the book holds",
        "non-positive-volume": "an order with a volume of 0 or less",
        "broker-out-of-range": "a broker_id outside [0, brokers)",
    },
    relations=relations,
    engine=make_engine,
    validate=validate,
    demo=DemoWorkload(
        input=DATA / "finance-standard.csv",
        format="orderbook",
        config={"query": "vwap", "strategy": "rpai"},
        partitions=1,
        read_options={"book": "auto"},  # the sides the query's relations declare
    ),
    # strategy auto switching plans with the batch size (docs/vwap/algorithm.md §6.5): its choice must
    # survive restores and replays like any other state
    workloads=(
        DemoWorkload(
            input=DATA / "finance-standard.csv",
            format="orderbook",
            config={"query": "psp", "strategy": "auto"},
            partitions=1,
            read_options={"book": "auto"},
            name="auto-psp",
        ),
    ),
    batch="ivmstream.services.vwap.batch:JOBS",
    fixed_relations=tuple({"query": q} for q in QUERIES),  # each query reads its own relations
    state_version=2,  # 2: strategy auto stores its credit towards a switch with its choice
)
