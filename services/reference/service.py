"""Declaration of the reference service: bag counts, column sums and a bag fingerprint per key.

It is also the template a new service starts from (docs/adding-a-service.md): its modules import each
other relatively and its name is its folder's, so a copy of the folder under another name is already a
service of that name, deployable like any other.
"""

from __future__ import annotations

from pathlib import Path

from ivmstream.sdk import DemoWorkload, ServiceDefinition

from .engine import make_engine
from .options import OPTIONS, relations

PACKAGE = __name__.rpartition(".")[0]
NAME = PACKAGE.rpartition(".")[2]  # the folder's name
DATA = Path(__file__).with_name("data")

SERVICE = ServiceDefinition(
    name=NAME,
    summary="bag counts, column sums and a bag fingerprint per key, over relations declared in the config",
    options=OPTIONS,
    reasons={
        "absent-tuple": "a delete of more copies of a tuple than the bag holds",
    },
    relations=relations,
    engine=make_engine,
    demo=DemoWorkload(input=DATA / "sample.jsonl", config={"key_field": "store"}, partitions=3),
    state_version=2,  # 2: the bag and its aggregates are checkpointed as entries
    batch=f"{PACKAGE}.batch:JOBS",
)
