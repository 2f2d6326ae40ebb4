"""A sharded query over Debezium topics (``inputs`` with ``shard_by``): the re-keying step writes each
event of a relation with the shard variable to its shard's partition and the others' to the broadcast
topic, tagged with their origins; the sharded workers drop the copies a restart of the step writes
(on their partition and on the broadcast topic, each against its own marks), and the coordinator's
global result equals one unsharded replay of the final tables, across stops of the step and workers."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from ivmstream.config import ConfigError, build_config, schema_of
from ivmstream.events.source import SourceRecord
from ivmstream.replay import replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.rekey import ORIGIN_HEADER, RekeyStep
from ivmstream.runtime.routing import routing_of
from ivmstream.service import load_service
from ivmstream.state import MemoryStore
from tests.helpers_cdc import stop_step_and_worker_once

FIVM = load_service("fivm")
RELATIONS: dict[str, list[dict[str, str]]] = {
    "Inventory": [{"locn": "int"}, {"ksn": "int"}, {"units": "int"}],
    "Location": [{"locn": "int"}, {"zip": "int"}],
    "Census": [{"zip": "int"}, {"pop": "int"}],
    "Item": [{"ksn": "int"}, {"price": "int"}],
}
QUERY: dict[str, Any] = {
    "relations": RELATIONS,
    "variable_order": {"locn": {"zip": {"pop": {}}, "ksn": {"units": {}, "price": {}}}},
    "ring": "sum",
    "sum": ["units", "price"],
}
TOPICS = {name: f"db.{name.lower()}" for name in RELATIONS}
SHARDS = "view.shards"


def _config(**extra: Any) -> Any:
    inputs = [{"topic": t, "format": "debezium-json", "relation": r} for r, t in TOPICS.items()]
    raw = {**QUERY, "inputs": inputs, "shard_by": "locn", "rekey_topic": SHARDS}
    return build_config(FIVM, {**raw, "output_topic": "partials", "dlq_topic": "dlq", **extra})


def _changes(seed: int, n: int) -> tuple[list[tuple[str, int, bytes]], list[tuple[str, dict[str, int]]]]:
    """Debezium creates, updates and deletes of random rows (each row's changes on one partition of its
    table's topic, by a row id), and the rows left at the end."""
    rng = random.Random(seed)
    live: dict[tuple[str, int], dict[str, int]] = {}
    out = []
    for i in range(n):
        relation = rng.choice(sorted(TOPICS))
        columns = [c for col in RELATIONS[relation] for c in col]
        mine = [k for k in live if k[0] == relation]
        new = {c: rng.randrange(6) for c in columns}
        if mine and rng.random() < 0.4:
            key = rng.choice(mine)
            op, before, after = rng.choice([("u", live[key], new), ("d", live[key], None)])
        else:
            key, op, before, after = (relation, i), "c", None, new
        if after is None:
            del live[key]
        else:
            live[key] = after
        payload = {"before": before, "after": after, "op": op, "source": {"table": relation}}
        out.append((TOPICS[relation], key[1] % 2, orjson.dumps(payload)))
    return out, [(k[0], row) for k, row in live.items()]


def _unsharded(final: list[tuple[str, dict[str, int]]]) -> Any:
    config = build_config(FIVM, {**QUERY})
    events = [orjson.dumps({"relation": r, "row": row, "delta": 1}) for r, row in final]
    result = replay_all(FIVM, config, [SourceRecord(i, e) for i, e in enumerate(events)]).result()
    return {k: v for k, v in orjson.loads(orjson.dumps(result)).items() if k != "stats"}


def test_config_reads_inputs_of_a_sharded_query_through_the_step() -> None:
    config = _config()
    assert config.rekeyed and config.sharded and config.input_topic == SHARDS
    assert config.broadcast_topic == f"{SHARDS}.broadcast"
    with pytest.raises(ConfigError, match="exclude each other"):
        _config(input_topic="x")


@pytest.mark.parametrize("seed", [3, 8])
def test_a_sharded_query_over_debezium_topics_equals_one_unsharded_replay(seed: int) -> None:
    rng = random.Random(seed)
    records, final = _changes(seed, 400)
    config = _config(batch_size=29, checkpoint_interval=1e-9)
    cluster = InMemoryCluster()
    for topic in TOPICS.values():
        cluster.create_topic(topic, 2)
    cluster.create_topic(SHARDS, 2)
    cluster.create_topic(config.broadcast_topic, 1)
    for topic, partition, value in records:
        cluster.produce(topic, value, None, partition=partition)
    step_store, worker_store = MemoryStore(), MemoryStore()
    for _round in range(3):
        stop_step_and_worker_once(
            FIVM, config, cluster, (step_store, worker_store), rng, (2, 5), (1, 4), group="w"
        )
    ends = sum(sum(cluster.end_offsets(t).values()) for t in TOPICS.values())
    RekeyStep(FIVM, config, cluster, step_store).run(until=lambda s: sum(s.positions().values()) >= ends)
    shard_ends, broadcast_end = cluster.end_offsets(SHARDS), len(cluster.messages(config.broadcast_topic))

    def all_applied(w: Worker) -> bool:
        return len(w.partitions) == 2 and all(
            (s.next_offset or 0) >= shard_ends[p] and (s.broadcast_next or 0) >= broadcast_end
            for p, s in w.partitions.items()
        )

    Worker(FIVM, config, cluster, worker_store, group="w").run(until=all_applied)
    run_to_end(Worker(FIVM, config, cluster, MemoryStore(), group="c", role="coordinator"))
    tags = [
        dict(m.headers() or [])[ORIGIN_HEADER]  # type: ignore[index]
        for topic in (SHARDS, config.broadcast_topic)
        for m in cluster.messages(topic)
    ]
    assert len(tags) > len(set(tags)), "no stop left copies to drop"
    routing = routing_of(schema_of(FIVM, config).relations.values(), config, 2)
    assert routing.broadcast and cluster.messages(config.broadcast_topic)  # both logs carry copies' origins
    latest: dict[str, Any] = {}
    for raw in cluster.values(config.global_topic):
        record = orjson.loads(raw or b"")
        latest[record["key"]] = record["result"]
    (result,) = latest.values()
    want = _unsharded(final)
    assert want["value"] != 0  # the join is not empty, so the comparison says something
    assert {k: v for k, v in result.items() if k != "stats"} == want
    assert not cluster.messages("dlq")
