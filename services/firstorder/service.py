"""Declaration of the firstorder service: SUM/COUNT aggregates over a join with a residual predicate,
maintained by first-order delta queries (docs/firstorder/index.md)."""

from __future__ import annotations

from pathlib import Path

from ivmstream.sdk import DemoWorkload, ServiceDefinition

from .engine import make_engine
from .options import OPTIONS, relations, validate

PACKAGE = __name__.rpartition(".")[0]
NAME = PACKAGE.rpartition(".")[2]  # the folder's name
DATA = Path(__file__).with_name("data")

# The demo: per broker, the volume of bid/ask pairs whose prices are more than 5 apart (axfinder's form).
DEMO_CONFIG = {
    "relations": {
        "bids": {"broker": "int", "price": "float", "volume": "float"},
        "asks": {"broker": "int", "a_price": "float", "a_volume": "float"},
    },
    "predicate": "a_price - price > 5 or price - a_price > 5",
    "free": ["broker"],
    "aggregates": {"spread_volume": "a_volume - volume"},
    "key_field": "market",
}

SERVICE = ServiceDefinition(
    name=NAME,
    summary="SUM/COUNT over a join with a residual (non-equality) predicate, by first-order delta queries",
    options=OPTIONS,
    reasons={
        "absent-tuple": "a delete of more copies of a tuple than the relation holds",
    },
    relations=relations,
    engine=make_engine,
    validate=validate,
    demo=DemoWorkload(input=DATA / "sample.jsonl", config=DEMO_CONFIG, partitions=2),
    workloads=(
        DemoWorkload(
            input=DATA / "sample.jsonl",
            config={**DEMO_CONFIG, "strategy": "recompute"},
            partitions=1,
            name="recompute",
        ),
    ),
    state_version=1,
    batch=f"{PACKAGE}.batch:JOBS",
)
