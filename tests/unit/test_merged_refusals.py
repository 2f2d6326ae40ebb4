"""A keyless view over change topics when its engine (not the decoder) refuses a record: the record changes
neither the view nor an upsert input's kept images, is dead-lettered once with the engine's reason, and the
outcome is the same whatever the batch size (the batch is taken back and applied record by record)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ivmstream.config import build_config
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

SERVICE = load_service("reference")
RELATIONS = {"prices": {"sku": "str", "price": "int"}}


def _native(row: dict[str, Any], delta: int) -> bytes:
    return orjson.dumps({"relation": "prices", "row": row, "delta": delta})


@pytest.mark.parametrize("batch_size", [1, 2, 100])
def test_an_upsert_record_the_engine_refuses_leaves_the_images_as_they_were(batch_size: int) -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("prices", 1)
    cluster.create_topic("fixes", 1)
    config = build_config(
        SERVICE,
        {
            "relations": RELATIONS,
            "inputs": [
                {"topic": "prices", "format": "upsert-json", "relation": "prices"},
                {"topic": "fixes", "format": "native"},
            ],
            "output_topic": "out",
            "dlq_topic": "dlq",
            "batch_size": batch_size,
        },
    )
    store = MemoryStore()
    a, b, c = ({"sku": "k", "price": p} for p in (1, 2, 4))
    x, y = ({"sku": "q", "price": p} for p in (8, 16))
    phases: list[list[tuple[str, bytes, bytes | None]]] = [
        [("prices", orjson.dumps(a), b"k"), ("prices", orjson.dumps(x), b"q")],  # images k:a q:x
        [("fixes", _native(a, -1), None)],  # the view loses a behind the images' back
        # b retracts a, which the view no longer holds: the engine refuses the record (and only it:
        # y, in the same batch, applies); k's image stays a
        [("prices", orjson.dumps(b), b"k"), ("prices", orjson.dumps(y), b"q")],
        [("fixes", _native(a, 1), None)],  # the view holds a again
        [("prices", orjson.dumps(c), b"k")],  # retracts a (the kept image), inserts c
    ]
    produced = 0
    for phase in phases:
        for topic, value, key in phase:
            cluster.produce(topic, value, key)
        produced += len(phase)
        worker = Worker(SERVICE, config, cluster, store)
        worker.run(until=lambda w, n=produced: sum(w.positions().values()) >= n)  # type: ignore[misc]
    result = orjson.loads(cluster.values("out")[-1] or b"")["result"]["relations"]["prices"]
    assert (result["count"], result["sums"]["price"]) == (2, 4 + 16)  # the view is {c, y}
    [dead] = cluster.messages("dlq")
    assert dict(dead.headers() or [])["ivmstream.reason"] == b"absent-tuple"
    assert dead.value() == orjson.dumps(b)
