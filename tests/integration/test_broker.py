"""The embedded broker must behave like Kafka for what ivmstream uses: exact delivery, partitions, groups."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from ivmstream.dev.broker import BrokerError, BrokerProcess, MockCluster

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
N_MESSAGES = 500


@pytest.fixture(scope="module")
def module_broker() -> Iterator[BrokerProcess]:
    """A broker of its own (not conftest's session one): these tests check startup topics and exact counts."""
    with BrokerProcess(topics={"roundtrip": 3}, partitions=2) as bp:
        yield bp


def _partition_counts(bootstrap: str, *topics: str) -> dict[str, int]:
    md = Producer({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {t: len(md.topics[t].partitions) for t in topics if t in md.topics}


def test_produce_consume_roundtrip_is_exact(module_broker: BrokerProcess) -> None:
    produced = {(f"k{i}".encode(), f"v{i}".encode()) for i in range(N_MESSAGES)}
    failures: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": module_broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for key, value in sorted(produced):
        producer.produce(
            "roundtrip", value=value, key=key, on_delivery=lambda err, _m: err and failures.append(err)
        )
    assert producer.flush(10) == 0
    assert failures == []

    consumer = Consumer(
        {
            "bootstrap.servers": module_broker.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    received: list[tuple[bytes, bytes]] = []
    partitions: set[int] = set()
    try:
        consumer.subscribe(["roundtrip"])
        deadline = time.monotonic() + 15
        while len(received) < N_MESSAGES and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                assert msg.error() is None, msg.error()
                received.append((msg.key(), msg.value()))
                partitions.add(msg.partition())
        # a short extra poll: anything beyond N would be a duplicate
        received += [
            (m.key(), m.value()) for m in consumer.consume(num_messages=10, timeout=0.5) if not m.error()
        ]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    assert len(received) == N_MESSAGES
    assert set(received) == produced
    assert partitions == {0, 1, 2}


def test_metadata_shows_requested_partition_count(module_broker: BrokerProcess) -> None:
    assert _partition_counts(module_broker.bootstrap, "roundtrip") == {"roundtrip": 3}
    assert module_broker.topics()["roundtrip"] == 3


def test_create_topic_via_stdin_protocol(module_broker: BrokerProcess) -> None:
    module_broker.create_topic("later", 5)
    assert _partition_counts(module_broker.bootstrap, "later") == {"later": 5}

    with pytest.raises(BrokerError) as info:
        module_broker.create_topic("later", 5)
    assert info.value.code == "TOPIC_ALREADY_EXISTS"
    module_broker.create_topic("later", 5, exist_ok=True)

    with pytest.raises(BrokerError) as info:
        module_broker.create_topic("bad", 0)
    assert info.value.code == "INVALID_PARTITIONS"
    assert module_broker.request("create a/b 1").startswith("error TOPIC_EXCEPTION: ")
    assert module_broker.request("frobnicate").startswith("error INVALID_REQUEST: ")
    assert module_broker.process.poll() is None


def test_bad_argument_exits_2_with_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ivmstream.dev.broker", "--partitions", "x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "--partitions" in lines[0] and "'x'" in lines[0]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_and_stdin_eof_does_not(signum: signal.Signals) -> None:
    bp = BrokerProcess().start()
    try:
        assert bp.bootstrap.startswith("127.0.0.1:")
        assert bp.process.stdin is not None
        bp.process.stdin.close()  # EOF on the command channel must not stop the broker
        time.sleep(0.5)
        assert bp.process.poll() is None
        assert _partition_counts(bp.bootstrap, "absent") == {}  # still answering
        bp.process.send_signal(signum)
        assert bp.process.wait(10) == 0
    finally:
        bp.stop()
    assert "Traceback" not in bp.stderr_tail


def test_in_process_mock_cluster() -> None:
    with MockCluster(brokers=2) as cluster:
        hosts = [addr.rpartition(":")[0] for addr in cluster.bootstrap.split(",")]
        assert hosts == ["127.0.0.1", "127.0.0.1"]
        cluster.create_topic("inproc", 4, replication_factor=2)
        with pytest.raises(BrokerError, match="TOPIC_ALREADY_EXISTS"):
            cluster.create_topic("inproc", 4)
        with pytest.raises(BrokerError, match="INVALID_REPLICATION_FACTOR"):
            cluster.create_topic("rf", 1, replication_factor=3)
        assert cluster.list_topics()["inproc"] == 4
    with pytest.raises(BrokerError, match="not running"):
        _ = cluster.bootstrap
