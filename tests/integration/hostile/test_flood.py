"""A flood of hostile records (half the stream) through a real worker: every bad record is dead-lettered
with its reason and counted, every good one applied. (Throughput under the flood: bench/hostile.py.)"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
from cli_runs import start_cli, stop
from confluent_kafka import KafkaError, Producer
from helpers import SAMPLE, offline_results, published_results, stream_config
from prometheus_client.parser import text_string_to_metric_families

from ivmstream.config import build_config, load_config, schema_of
from ivmstream.dev.redis_server import free_port
from ivmstream.runtime import Worker
from ivmstream.runtime.clients import KafkaClients
from ivmstream.runtime.dlq import latest_results, read_dead_letters
from ivmstream.runtime.progress import wait_caught_up
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from fuzz.hostile_records import KINDS, interleave

LIMIT = 4096  # the worker's record size limit (IVMSTREAM_MAX_RECORD_BYTES), so oversized records are small


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err.str())

    for key, value in records:
        producer.produce(topic, value, key, on_delivery=delivered)
    assert producer.flush(60) == 0 and not failed, failed


def scrape(port: int) -> Counter[str]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return Counter(
        {
            s.labels["reason"]: int(s.value)
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "ivmstream_events_rejected_total"
        }
    )


def test_half_the_stream_hostile(broker, redis_server, unique: str, tmp_path: Path) -> None:
    config = stream_config(tmp_path / "c.json", unique, key_field="store", checkpoint_interval=0.2)
    service = load_service("reference")
    schema = schema_of(service, load_config(service, config))
    lines = SAMPLE.read_bytes().splitlines()
    good = [(orjson.loads(line)["row"]["store"].encode(), line) for line in lines]
    stream = interleave(good, lambda ev: schema.relations[ev["relation"]], seed=18, max_record_bytes=LIMIT)
    expected = Counter((value, reason) for _, value, reason in stream if reason is not None)
    assert len(expected) > 0 and sum(expected.values()) == len(good)  # half the stream, all kinds
    assert {reason for _, reason in expected} == set(KINDS)
    topic = f"{unique}.updates"
    broker.create_topic(topic, 3)
    produce(broker.bootstrap, topic, [(key, value) for key, value, _ in stream])

    port = free_port()
    args = ["run", "reference", "--bootstrap", broker.bootstrap, "--config", str(config)]
    args += ["--group", f"{unique}-g", "--state-dir", str(tmp_path / "s"), "--redis", redis_server.url]
    log = tmp_path / "worker.log"
    env = {"IVMSTREAM_MAX_RECORD_BYTES": str(LIMIT)}
    proc = start_cli(*args, "--metrics-port", str(port), log=log, env=env)
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-g", topic, timeout=120)
        deadline = time.monotonic() + 30
        while (counted := scrape(port)).total() < len(good) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        assert stop(proc) == 0, log.read_text()[-3000:]

    dead = read_dead_letters(broker.bootstrap, f"{unique}.dlq")
    assert Counter((d.value, d.reason) for d in dead) == expected
    assert all(d.topic == topic and d.detail for d in dead)
    assert counted == Counter(reason for _, reason in expected.elements())
    good_file = tmp_path / "good.jsonl"
    good_file.write_bytes(b"\n".join(lines) + b"\n")
    assert published_results(redis_server.url, f"{unique}.results") == offline_results(config, good_file)


def test_a_record_too_large_for_a_whole_dead_letter_does_not_stop_its_partition(broker, unique: str) -> None:
    """Records over the record size limit (1 MiB by default) and over the producer's message size limit:
    dead-lettered cut to dead_letter_max_bytes, with their full length in a header; the records after them
    are applied. Sent whole, such a dead letter is refused by the producer, which stops the worker at the
    same record on every restart."""
    topic = f"{unique}.updates"
    broker.create_topic(topic, 1)
    lines = SAMPLE.read_bytes().splitlines()[:2]
    huge = [b"{" + b"x" * 1_100_000, b"not json " * 120_000]  # oversized (and malformed), 1.1 and 1.08 MB
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 4_000_000})
    for value in [lines[0], *huge, lines[1]]:
        producer.produce(topic, value, b"k")
    assert producer.flush(30) == 0
    service = load_service("reference")
    config = build_config(
        service,
        {
            "key_field": "store",
            "input_topic": topic,
            "output_topic": f"{unique}.results",
            "dlq_topic": f"{unique}.dlq",
        },
    )
    worker = Worker(service, config, KafkaClients(broker.bootstrap), MemoryStore(), group=f"{unique}-g")
    deadline = time.monotonic() + 60

    def done(w: Worker) -> bool:
        assert time.monotonic() < deadline, f"the worker did not reach offset 4: {w.positions()}"
        return w.positions().get(0) == 4

    worker.run(until=done)
    dead = read_dead_letters(broker.bootstrap, f"{unique}.dlq")
    assert [(d.offset, d.reason, d.truncated_from) for d in dead] == [
        (1, "oversized", len(huge[0])),
        (2, "oversized", len(huge[1])),
    ]
    assert [d.value for d in dead] == [v[: config.dead_letter_max_bytes] for v in huge]
    assert config.dead_letter_max_bytes == 512 * 1024
    results = latest_results(broker.bootstrap, f"{unique}.results")
    stores = [orjson.loads(line)["row"]["store"] for line in lines]
    assert sorted(results) == sorted(stores)  # both good records, before and after the huge ones, applied
    for line in lines:
        row = orjson.loads(line)["row"]
        record = results[row["store"]]
        assert record["result"]["relations"]["items"]["sums"]["qty"] == row["qty"]
        assert record["offsets"] == {f"{topic}:0": 4}
