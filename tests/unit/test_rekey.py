"""A keyed view over Debezium topics partitioned by primary key (``inputs`` with ``key_field``): the
re-keying step and the view's worker over the in-memory cluster equal the offline replay of the same
change records, also when either is stopped mid-stream without a checkpoint and restarted, and copies
of re-keyed records (a step's restart, a zombie's late writes) are applied once."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import orjson
import pytest
from confluent_kafka import Message

from ivmstream import changelog
from ivmstream.config import ConfigError, build_config
from ivmstream.replay import replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.rekey import ORIGIN_HEADER, RekeyStep, fresh, origin_tag
from ivmstream.service import load_service
from ivmstream.state import MemoryStore, StateError
from tests.helpers_cdc import RELATIONS, Workload, offline_keyed, stop_step_and_worker_once, workload

SERVICE = load_service("reference")
TOPICS = ("db.orders", "db.customers")
INPUTS = [{"topic": t, "format": "debezium-json"} for t in TOPICS]
REKEYED = "view.rekeyed"


def _config(**extra: Any) -> Any:
    raw = {
        "relations": RELATIONS,
        "inputs": INPUTS,
        "key_field": "tenant",
        "rekey_topic": REKEYED,
        "output_topic": "out",
        "dlq_topic": "dlq",
        **extra,
    }
    return build_config(SERVICE, raw)


def _cluster(w: Workload, rekeyed_partitions: int = 3) -> InMemoryCluster:
    cluster = InMemoryCluster()
    for topic in TOPICS:
        cluster.create_topic(topic, 4)
    cluster.create_topic(REKEYED, rekeyed_partitions)
    for r in w.records:
        cluster.produce(r.topic, r.value, r.key, partition=r.partition)
    return cluster


def offline(w: Workload) -> Any:
    return offline_keyed(w, SERVICE, "tenant", TOPICS)


def published(cluster: InMemoryCluster) -> dict[str, Any]:
    """Each key's latest published result."""
    latest: dict[str, Any] = {}
    for value in cluster.values("out"):
        record = orjson.loads(value or b"")
        latest[record["key"]] = record["result"]
    return dict(sorted(latest.items()))


def _step_until_done(cluster: InMemoryCluster, config: Any, store: MemoryStore) -> None:
    ends = sum(sum(cluster.end_offsets(t).values()) for t in TOPICS)
    step = RekeyStep(SERVICE, config, cluster, store)
    step.run(until=lambda s: sum(s.positions().values()) >= ends)


def _reasons(cluster: InMemoryCluster) -> Counter[str]:
    return Counter(dict(m.headers() or [])["ivmstream.reason"].decode() for m in cluster.messages("dlq"))  # type: ignore[union-attr]


def test_config_reads_inputs_with_key_field_through_the_rekeyed_topic() -> None:
    config = _config()
    assert config.rekeyed and config.input_topic == REKEYED
    assert build_config(
        SERVICE, {"relations": RELATIONS, "inputs": INPUTS, "key_field": "k"}
    ).input_topic == ("reference.rekeyed")
    with pytest.raises(ConfigError, match="rekey_topic applies"):
        build_config(SERVICE, {"relations": RELATIONS, "rekey_topic": "x"})
    assert _config(emit="every-event").emit == "every-event"


def test_a_keyed_view_over_debezium_topics_equals_the_offline_replay() -> None:
    w = workload(seed=3, changes=400, key_field="tenant")
    cluster, config = _cluster(w), _config(batch_size=29, checkpoint_interval=1e-9)
    _step_until_done(cluster, config, MemoryStore())
    run_to_end(Worker(SERVICE, config, cluster, MemoryStore()))
    assert published(cluster) == offline(w)
    assert _reasons(cluster) == Counter(w.bad)
    # every re-keyed record sits on its key's partition, tagged with its origin
    for msg in cluster.messages(REKEYED):
        assert ORIGIN_HEADER in dict(msg.headers() or [])


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_stops_of_the_step_and_of_the_worker_without_a_checkpoint_change_nothing(seed: int) -> None:
    """The step and the worker alternate over the stream; each is stopped several times after
    uncheckpointed work (the step's writes since its checkpoint are then written again)."""
    rng = random.Random(seed)
    w = workload(seed=seed, changes=500, key_field="tenant")
    cluster, config = _cluster(w), _config(batch_size=23, checkpoint_interval=1e-9)
    step_store, worker_store = MemoryStore(), MemoryStore()
    for _round in range(4):
        stop_step_and_worker_once(SERVICE, config, cluster, (step_store, worker_store), rng, (5, 15), (2, 8))
    _step_until_done(cluster, config, step_store)
    run_to_end(Worker(SERVICE, config, cluster, worker_store))
    tags = [dict(m.headers() or [])[ORIGIN_HEADER] for m in cluster.messages(REKEYED)]  # type: ignore[index]
    copies = len(tags) - len(set(tags))
    assert copies > 0, "no stop left copies to drop"
    assert published(cluster) == offline(w)
    assert set(_reasons(cluster)) == set(w.bad)


def _tagged(topic: str, partition: int, offset: int, index: int) -> Message:
    tag = origin_tag(topic, partition, offset, index)
    return Message(
        topic=REKEYED, partition=0, offset=0, key=b"k", value=b"{}", headers=[(ORIGIN_HEADER, tag)]
    )


def test_copies_interleaved_with_a_zombie_are_applied_once_in_order() -> None:
    """A step restarted from its checkpoint writes the same tagged sequence again from there, while its
    predecessor's late writes may still arrive: each writer in order and without gaps, everything before
    the checkpoint acknowledged first. Interleaved at random, every tag is taken once, in order."""
    seq = [("db.orders", 0, o, i) for o in range(20) for i in range(1 + o % 2)]
    rng = random.Random(4)
    for _ in range(200):
        old = seq[: rng.randint(0, len(seq))]
        checkpoint = rng.randint(0, len(old))
        a, b, merged = old[checkpoint:], seq[checkpoint:], list(old[:checkpoint])
        while a or b:
            merged.append((a if a and (not b or rng.random() < 0.5) else b).pop(0))
        marks: dict[str, tuple[int, int]] = {}
        taken: list[Message] = []
        for chunk in range(0, len(merged), 7):
            taken += fresh(marks, [_tagged(*t) for t in merged[chunk : chunk + 7]])
        assert [dict(m.headers() or [])[ORIGIN_HEADER] for m in taken] == [origin_tag(*t) for t in seq]


# --- a keyless view publishing per event: through the step's one-partition log -----------------------

LOG = "view.log"


def _every_event_config(**extra: Any) -> Any:
    raw = {
        "relations": RELATIONS,
        "inputs": INPUTS,
        "emit": "every-event",
        "rekey_topic": LOG,
        "output_topic": "out",
        "dlq_topic": "dlq",
        **extra,
    }
    return build_config(SERVICE, raw)


def _changelog(cluster: InMemoryCluster) -> Any:
    """The view's changelog as a reader applies it: each record once (by its event id, the log's offset;
    a copy published again after a crash must be the same record), its patch applied in order."""
    seen: dict[str, Any] = {}
    docs: dict[str, Any] = {}
    for value in cluster.values("out"):
        record = orjson.loads(value or b"")
        if record["event"] in seen:
            assert seen[record["event"]] == record["patch"], "a record published again differs"
            continue
        seen[record["event"]] = record["patch"]
        docs[record["key"]] = changelog.apply(docs.get(record["key"], {}), record["patch"])
    return docs, len(seen)


def _offline_keyless(w: Workload) -> Any:
    view = replay_all(SERVICE, build_config(SERVICE, {"relations": RELATIONS}), w.final_events())
    return orjson.loads(orjson.dumps(view.result()))


def test_a_keyless_view_over_inputs_publishes_every_event_exactly_once() -> None:
    """The step writes the events of every input partition to one partition; the worker reads it with
    ``emit: every-event``. Both are stopped several times after uncheckpointed work: the changelog, read
    once per event id, replays into the final tables, and a record published twice is the same record."""
    rng = random.Random(4)
    w = workload(seed=4, changes=300)
    cluster = InMemoryCluster()
    for topic in TOPICS:
        cluster.create_topic(topic, 4)
    cluster.create_topic(LOG, 1)
    for r in w.records:
        cluster.produce(r.topic, r.value, r.key, partition=r.partition)
    config = _every_event_config(batch_size=31, checkpoint_interval=1e-9)
    step_store, worker_store = MemoryStore(), MemoryStore()
    for _round in range(3):
        stop_step_and_worker_once(SERVICE, config, cluster, (step_store, worker_store), rng, (4, 10), (2, 6))
    _step_until_done(cluster, config, step_store)
    run_to_end(Worker(SERVICE, config, cluster, worker_store))
    tags = [dict(m.headers() or [])[ORIGIN_HEADER] for m in cluster.messages(LOG)]  # type: ignore[index]
    assert len(tags) > len(set(tags)), "no stop left copies to drop"
    docs, events = _changelog(cluster)
    assert list(docs.values()) == [_offline_keyless(w)]  # one view
    assert events == len(set(tags))  # one changelog record per event, copies dropped
    assert set(_reasons(cluster)) == set(w.bad)


def test_a_keyless_views_log_must_have_one_partition() -> None:
    cluster = InMemoryCluster()
    for topic in TOPICS:
        cluster.create_topic(topic, 4)
    cluster.create_topic(LOG, 2)
    with pytest.raises(StateError, match="exactly one"):
        RekeyStep(SERVICE, _every_event_config(), cluster, MemoryStore()).start()
