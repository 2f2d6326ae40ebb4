"""Our murmur2 places keys exactly where the real producer (librdkafka murmur2_random) does."""

from __future__ import annotations

from helpers import read_topic

from ivmstream.events import SourceRecord
from ivmstream.partitioner import murmur2, partition_for
from ivmstream.runtime.produce import produce_records


def test_known_java_values():
    # Values of org.apache.kafka.common.utils.Utils.murmur2 (Kafka's own unit test vectors).
    assert murmur2(b"21") == (-973932308) & 0xFFFFFFFF
    assert murmur2(b"foobar") == (-790332482) & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-long-string") == (-985981536) & 0xFFFFFFFF
    assert murmur2(b"") == 275646681


def test_matches_the_producer(broker, unique):
    topic = f"{unique}.keys"
    broker.create_topic(topic, 7)
    keys = [f"k{i}".encode() for i in range(300)] + ["ключ".encode(), b"", b"\xff\x00abc"]
    produce_records(broker.bootstrap, topic, [SourceRecord(i, b"{}", k) for i, k in enumerate(keys)])
    msgs = read_topic(broker.bootstrap, topic, expect=len(keys))
    for m in msgs:
        assert m.partition() == partition_for(m.key(), 7), m.key()
    assert partition_for(None, 7) == 0
