"""Exactly-once state: kill -9 mid-stream, and a crash between the state write and the offset commit."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import SAMPLE, offline_results, stream_config, trickle

from ivmstream.config import load_config
from ivmstream.redis_client import connect
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.hooks import CheckpointWritten, Hooks
from ivmstream.runtime.progress import group_progress
from ivmstream.service import load_service
from ivmstream.state import StateChanges, open_store
from ivmstream.testing import Case, check_kill9_restart


@pytest.mark.slow
def test_kill9_mid_stream_on_redis_state_equals_uninterrupted(broker, redis_server, unique, tmp_path):
    """The conformance suite kills every service's worker on RocksDB state; this is the same check with
    the state in Redis (one hash per partition, written with MULTI/EXEC)."""
    service = load_service("reference")
    assert service.demo is not None
    case = Case("reference", service, service.demo)
    kills = check_kill9_restart(case, broker, redis_server.url, tmp_path, unique, backend="redis")
    assert all(0 < k.checkpointed < k.total and k.published_beyond > 0 for k in kills)
    stored = open_store("redis", f"reference.{unique}-g", redis_url=redis_server.url)
    try:
        assert any(stored.load(f"{unique}.updates", p).offset for p in range(service.demo.partitions))
    finally:
        stored.close()


class SimulatedCrash(Exception):
    pass


def test_crash_between_state_write_and_offset_commit_does_not_double_count(broker, unique, tmp_path):
    topic, group = f"{unique}.updates", f"{unique}-g"
    broker.create_topic(topic, 2)
    config_path = stream_config(
        tmp_path / "c.json", unique, key_field="store", batch_size=100, checkpoint_interval=0.001
    )
    trickle(broker.bootstrap, topic, SAMPLE, "store", 0.0)
    service = load_service("reference")
    config = load_config(service, config_path)
    state_dir = tmp_path / "state"

    checkpoints = []

    def crash_on_third(written: CheckpointWritten) -> None:
        if written.partitions:  # the state is stored; the group's offsets are not committed yet
            checkpoints.append(written)
            if len(checkpoints) == 3:
                raise SimulatedCrash

    first = Worker(
        service,
        config,
        KafkaClients(broker.bootstrap),
        open_store("rocksdb", group, state_dir=state_dir),
        group=group,
        hooks=Hooks(checkpoint_written=[crash_on_third]),
    )
    with pytest.raises(SimulatedCrash):
        first.run()

    stored = open_store("rocksdb", group, state_dir=state_dir)
    stored_offsets = {p: stored.load(topic, p).offset or 0 for p in (0, 1)}
    stored.close()
    kafka_offsets = {p.partition: p.committed for p in group_progress(broker.bootstrap, group, topic)}
    # The crash left the group's Kafka offsets behind the state: trusting them would re-apply a batch.
    assert any(kafka_offsets[p] < stored_offsets[p] for p in stored_offsets)
    assert 0 < sum(stored_offsets.values()) < 3000

    # Restart, and also force the broker to redeliver from the stale Kafka offsets mid-run, as a naive
    # consumer would see them; the runtime must apply each record exactly once regardless.
    redelivered = []

    def rewind_once(w: Worker) -> bool:
        if not redelivered and w.partitions:
            for p, offset in kafka_offsets.items():
                if p in w.partitions:
                    w.consumer.seek(TopicPartition(topic, p, offset))
            redelivered.append(True)
        return all(w.positions().get(p) == hi for p, hi in ends.items())

    ends = {p.partition: p.high for p in group_progress(broker.bootstrap, group, topic)}
    second = Worker(
        service,
        config,
        KafkaClients(broker.bootstrap),
        open_store("rocksdb", group, state_dir=state_dir),
        group=group,
    )
    results = {}

    def until(w: Worker) -> bool:
        done = rewind_once(w)
        if done:
            results.update(w.results())
        return done

    second.run(until=until)
    assert redelivered
    assert results == offline_results(config_path, SAMPLE)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], 10)]
    finally:
        c.close()


def test_redis_store_commit_is_one_transaction(redis_server, unique):
    store = open_store("redis", unique, redis_url=redis_server.url)
    envelope = b'{"test": 1}'
    store.commit("t", 0, 7, StateChanges(snapshots={"a": b"1", "b": b"2"}), envelope)
    store.commit("t", 0, 9, StateChanges(snapshots={"a": b"3"}), envelope)
    cp = store.load("t", 0)
    assert cp.offset == 9 and cp.snapshots == {"a": b"3", "b": b"2"}
    client = connect(redis_server.url)
    assert client.type(f"ivmstream:state:{unique}:t:0") == b"hash"
