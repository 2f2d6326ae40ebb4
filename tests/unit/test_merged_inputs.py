"""A keyless view over two Debezium topics of four partitions each (``inputs``), run by a real Worker over
the in-memory cluster: it equals the final tables, also across crashes and restarts from its last
checkpoint, and each bad change record is dead-lettered once with its reason."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from ivmstream.config import ConfigError, build_config
from ivmstream.replay import replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster
from ivmstream.runtime.hooks import CheckpointWritten, Hooks
from ivmstream.service import load_service
from ivmstream.state import MemoryStore
from tests.helpers_cdc import RELATIONS, Workload, workload

SERVICE = load_service("reference")
INPUTS = [
    {"topic": "db.orders", "format": "debezium-json"},
    {"topic": "db.customers", "format": "debezium-json"},
]


class Crash(Exception):
    pass


def _config(**extra: Any) -> Any:
    raw = {"relations": RELATIONS, "inputs": INPUTS, "output_topic": "out", "dlq_topic": "dlq", **extra}
    return build_config(SERVICE, raw)


def _cluster(w: Workload) -> InMemoryCluster:
    cluster = InMemoryCluster()
    for topic in ("db.orders", "db.customers"):
        cluster.create_topic(topic, 4)
    for r in w.records:
        cluster.produce(r.topic, r.value, r.key, partition=r.partition)
    return cluster


def _ends(cluster: InMemoryCluster) -> int:
    return sum(sum(cluster.end_offsets(t).values()) for t in ("db.orders", "db.customers"))


def _run(worker: Worker, cluster: InMemoryCluster) -> None:
    total = _ends(cluster)
    worker.run(until=lambda w: sum(w.positions().values()) >= total)  # type: ignore[arg-type,misc]


def _latest(cluster: InMemoryCluster) -> Any:
    return orjson.loads(cluster.values("out")[-1] or b"")


def test_config_reads_inputs_and_refuses_what_it_cannot_keep_exactly_once() -> None:
    config = _config()
    assert config.input_topic == "db.orders" and [i.topic for i in config.inputs] == [
        "db.orders",
        "db.customers",
    ]
    with pytest.raises(ConfigError, match="exclude each other"):
        _config(input_topic="x")
    every = _config(emit="every-event")  # through the re-keying step's one-partition log
    assert every.rekeyed and every.input_topic == "reference.rekeyed" and every.key_field is None


@pytest.mark.parametrize("crashes", [0, 2])
def test_a_keyless_view_over_debezium_topics_equals_the_final_tables(crashes: int) -> None:
    w = workload(seed=7, changes=400)
    cluster = _cluster(w)
    store = MemoryStore()
    config = _config(batch_size=37, checkpoint_interval=1e-9)
    for attempt in range(crashes):
        seen = [0]

        def crash(_cp: CheckpointWritten, seen: list[int] = seen, at: int = 3 + 4 * attempt) -> None:
            seen[0] += 1
            if seen[0] == at:
                raise Crash

        worker = Worker(SERVICE, config, cluster, store, hooks=Hooks(checkpoint_written=[crash]))
        with pytest.raises(Crash):
            _run(worker, cluster)
    _run(Worker(SERVICE, config, cluster, store), cluster)
    expected = replay_all(SERVICE, build_config(SERVICE, {"relations": RELATIONS}), w.final_events()).result()
    latest = _latest(cluster)
    assert latest["result"] == orjson.loads(orjson.dumps(expected))
    assert set(latest["offsets"]) == {f"{t}:{p}" for t in ("db.orders", "db.customers") for p in range(4)}
    reasons = Counter(
        dict(m.headers() or []).get("ivmstream.reason", b"").decode() for m in cluster.messages("dlq")
    )
    if crashes == 0:
        assert reasons == Counter(w.bad)
    else:  # a crash re-applies what its last checkpoint did not cover: dead letters are at least once
        assert set(reasons) == set(w.bad) and all(reasons[r] >= n for r, n in w.bad.items())


def test_an_update_the_engine_refuses_half_of_is_undone_whole() -> None:
    cluster = InMemoryCluster()
    cluster.create_topic("db.orders", 1)
    cluster.create_topic("db.customers", 1)
    row = {"id": 1, "customer": "a", "amount": "1.00"}
    ghost = {"id": 2, "customer": "b", "amount": "2.00"}
    for value in (
        {"op": "c", "before": None, "after": row, "source": {"table": "orders"}},
        {"op": "u", "before": ghost, "after": {**ghost, "amount": "3.00"}, "source": {"table": "orders"}},
    ):
        cluster.produce("db.orders", orjson.dumps(value), b"k")
    worker = Worker(SERVICE, _config(), cluster, MemoryStore())
    _run(worker, cluster)
    expected = replay_all(
        SERVICE,
        build_config(SERVICE, {"relations": RELATIONS}),
        workload_of([("orders", row)]),
    ).result()
    assert _latest(cluster)["result"] == orjson.loads(orjson.dumps(expected))
    [dead] = cluster.messages("dlq")
    assert dict(dead.headers() or [])["ivmstream.reason"] == b"absent-tuple"


def workload_of(rows: list[tuple[str, dict[str, Any]]]) -> Any:
    from ivmstream.events import SourceRecord

    return [
        SourceRecord(i + 1, orjson.dumps({"relation": rel, "row": row, "delta": 1}))
        for i, (rel, row) in enumerate(rows)
    ]
