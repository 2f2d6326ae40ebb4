"""Declaration of the reference service (platform tests and the demo)."""

from __future__ import annotations

from pathlib import Path

from ivmstream.sdk import DemoWorkload, ServiceDefinition
from ivmstream.services.reference.engine import BagEngine
from ivmstream.services.reference.query import OPTIONS, relations

SERVICE = ServiceDefinition(
    name="reference",
    summary="bag counts, column sums and an bag fingerprint per key (the platform's reference engine)",
    options=OPTIONS,
    relations=relations,
    engine=lambda o: BagEngine(o["relations"], o["allow_negative"], o["resident_entries"]),
    demo=DemoWorkload(
        input=Path(__file__).with_name("sample.jsonl"),
        config={"key_field": "store"},
        partitions=3,
    ),
    state_version=2,  # 2: the bag and its aggregates are checkpointed as entries
    batch="ivmstream.services.reference.batch:JOBS",
    platform_only=True,
)
