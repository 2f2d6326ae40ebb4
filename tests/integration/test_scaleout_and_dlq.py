"""Two workers split the partitions; bad input goes to the dead-letter topic and processing continues."""

from __future__ import annotations

import time
import urllib.request

import orjson
from helpers import (
    SAMPLE,
    catch_up_with_workers,
    headers,
    ivm,
    ivm_produce,
    offline_results,
    published_results,
    read_topic,
    running_worker,
    running_workers,
    stream_config,
    worker_args,
)
from prometheus_client.parser import text_string_to_metric_families

from ivmstream.dev.redis_server import free_port
from ivmstream.runtime.progress import wait_caught_up


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def metric(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted({"service": "reference", **labels}.items()))), 0.0)


def wait_for(predicate, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_two_workers_split_partitions_and_union_equals_single_worker(broker, redis_server, unique, tmp_path):
    topic = f"{unique}.updates"
    broker.create_topic(topic, 4)
    pair, solo = (
        stream_config(
            tmp_path / f"{name}.json",
            unique,
            key_field="store",
            output_topic=f"{unique}.{name}",
            checkpoint_interval=0.2,
        )
        for name in ("pair", "solo")
    )
    ports = [free_port(), free_port()]
    with running_workers(
        [
            worker_args(
                "reference", broker, redis_server, unique, tmp_path, pair, "pair", ["--metrics-port", str(p)]
            )
            for p in ports
        ],
        [tmp_path / f"pair{i}.log" for i in range(len(ports))],
    ):

        def both_assigned() -> bool:
            try:
                return all(metric(scrape(p), "ivmstream_assigned_partitions") == 2 for p in ports)
            except OSError:
                return False

        wait_for(both_assigned, what="both workers to own two partitions each")
        ivm_produce(broker.bootstrap, topic, SAMPLE, key_field="store")
        progress = wait_caught_up(broker.bootstrap, f"{unique}-pair", topic)
        consumed = [metric(scrape(p), "ivmstream_events_in_total") for p in ports]
    assert sum(consumed) == 3000 and all(c > 0 for c in consumed)
    assert sum(1 for p in progress if p.high > 0) >= 3

    # the single worker keeps Python's default GC settings: the policy must not change any result
    default_gc = ["--gc", "default"]
    single = worker_args("reference", broker, redis_server, unique, tmp_path, solo, "solo", default_gc)
    catch_up_with_workers(single, broker, unique, tmp_path, group="solo")
    union = published_results(redis_server.url, f"{unique}.pair")
    assert union == published_results(redis_server.url, f"{unique}.solo")
    assert union == offline_results(solo, SAMPLE)


def test_bad_events_go_to_dlq_with_reason_and_partition_keeps_going(broker, redis_server, unique, tmp_path):
    topic, dlq = f"{unique}.updates", f"{unique}.dlq"
    broker.create_topic(topic, 1)
    good = [
        {"relation": "items", "row": {"item": "fig", "qty": 2, "price": "1.50"}, "delta": 1},
        {"relation": "items", "row": {"item": "kiwi", "qty": 1, "price": "0.25"}, "delta": 3},
        {"relation": "items", "row": {"item": "fig", "qty": 2, "price": "1.50"}, "delta": -1},
    ]
    bad = {
        "malformed-json": b'{"relation": "items", "row": {',
        "unknown-relation": orjson.dumps({"relation": "nope", "row": {"x": 1}, "delta": 1}),
        "wrong-type": orjson.dumps(
            {"relation": "items", "row": {"item": "fig", "qty": "2", "price": "1"}, "delta": 1}
        ),
        "zero-delta": orjson.dumps(
            {"relation": "items", "row": {"item": "fig", "qty": 2, "price": "1"}, "delta": 0}
        ),
        "absent-tuple": orjson.dumps(
            {"relation": "items", "row": {"item": "yam", "qty": 1, "price": "1"}, "delta": -1}
        ),
    }
    lines = [
        orjson.dumps(good[0]),
        *list(bad.values())[:3],
        orjson.dumps(good[1]),
        *list(bad.values())[3:],
        orjson.dumps(good[2]),
    ]
    data = tmp_path / "mixed.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    config = stream_config(tmp_path / "c.json", unique, checkpoint_interval=0.2)
    ivm_produce(broker.bootstrap, topic, data)
    port = free_port()
    args = worker_args(
        "reference", broker, redis_server, unique, tmp_path, config, extra=["--metrics-port", str(port)]
    )
    with running_worker(args, tmp_path / "w.log"):
        wait_caught_up(broker.bootstrap, f"{unique}-g", topic)
        samples = scrape(port)

    dead = read_topic(broker.bootstrap, dlq, expect=5)
    by_reason = {headers(m)["ivmstream.reason"]: m for m in dead}
    assert set(by_reason) == set(bad)
    for reason, raw in bad.items():
        msg = by_reason[reason]
        assert msg.value() == raw  # the original bytes, untouched
        h = headers(msg)
        assert h["ivmstream.detail"] and h["ivmstream.source"].startswith(f"{topic}:0:")
        assert metric(samples, "ivmstream_events_rejected_total", reason=reason) == 1
    assert metric(samples, "ivmstream_events_in_total") == len(lines)
    assert metric(samples, "ivmstream_events_applied_total") == 3

    # The good events around the bad ones were all applied, exactly as replay computes them.
    expected = offline_results(config, data)
    assert published_results(redis_server.url, f"{unique}.results") == {"": expected}
    assert expected["relations"]["items"]["count"] == 3
    replayed = ivm("replay", "reference", "--config", str(config), "--input", str(data), check=False)
    assert replayed.returncode == 1 and replayed.stderr.endswith(
        "5 of 8 input events were rejected, listed above (--allow-rejects exits 0 anyway)\n"
    )
    assert orjson.loads(replayed.stdout.splitlines()[-1])["rejected"] == 5
    assert sum("rejected (" in line for line in replayed.stderr.splitlines()) == 5
