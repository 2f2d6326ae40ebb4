"""Declaration of the fivm service: SUM aggregates over joins in payload rings, maintained by F-IVM.

Its options are in ``options``; its engine is ``FivmEngine`` behind ``engine.ServiceEngine``, which
only puts the result into the service's result form (docs/fivm/algorithm.md §7.2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.fivm.engine import make_engine
from ivmstream.services.fivm.options import HOUSING, OPTIONS, relations, validate

DATA = Path(__file__).with_name("data")


# The demo: a covariance ring over the Housing sample (services/fivm/data/README.md), computed exactly
# in four decimals, so results do not depend on how the stream is batched. Demographics and Transport
# are static: they load first, then updates to them are refused.
DEMO_FEATURES = (
    "price",
    "livingarea",
    "nbbedrooms",
    "nbbathrooms",
    "pricerangeshop",
    "averagesalary",
    "crimesperyear",
    "distancecitycentre",
)
DEMO_CONFIG: dict[str, Any] = {
    "relations": {
        name: {"postcode": "int", **dict.fromkeys(cols[1:], "float")} for name, cols in HOUSING.items()
    },
    "ring": "covariance",
    "features": list(DEMO_FEATURES),
    "decimals": 4,
    "updatable": ["House", "Shop", "Institution", "Restaurant"],
    "model": {"label": "price", "ridge": 1.0},
    "key_field": "region",
}

SERVICE = ServiceDefinition(
    name="fivm",
    summary="SUM aggregates over joins in payload rings (counts, covariance matrices, listings), F-IVM",
    options=OPTIONS,
    reasons={
        "static-relation": "an update of a relation the query declares static",
        "bad-factors": "factorized update factors missing, not valid JSON or not keyed by their columns",
        "factor-columns": "a factorized update whose factors do not split the relation's columns disjointly",
        "factor-value": "a factor value that is not a valid multiplicity or weight",
        "factor-precision": "a factorized update whose product needs more decimals than the ring keeps",
        "int-out-of-range": "an integer column value outside int64",
    },
    relations=relations,
    engine=make_engine,
    validate=validate,
    demo=DemoWorkload(input=DATA / "housing.jsonl", config=DEMO_CONFIG, partitions=2),
    state_version=1,
    sharding="ivmstream.services.fivm.sharding:SHARDING",  # one query over workers: docs/architecture.md
    batch="ivmstream.services.fivm.batch:JOBS",  # Spark bootstrap and reconcile: docs/fivm/algorithm.md §8
)
