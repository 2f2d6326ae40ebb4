"""Streaming from the command line as a newcomer does it: a bare ``ivmstream broker`` serves every
service's topics, ``run`` against a missing topic says which and how to create it, and the dead letters
a worker wrote are read with one command (``ivmstream dlq``), every partition, with their reasons."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient
from helpers import REPO, cli_env, ivm, run_args, start_worker, stop_worker, stream_config

from ivmstream.cli.broker import SERVICE_TOPICS
from ivmstream.runtime.dlq import read_dead_letters
from ivmstream.service import available_services

GOOD = {"relation": "items", "row": {"item": "a", "qty": 2, "price": "1.5"}, "delta": 1}
LONG = '{"relation": "items", "row": {"item": "' + "x" * 100 + '"'  # malformed, longer than the cap
BAD = ["{not json", '{"relation": "nope", "row": {}, "delta": 1}', LONG]


def test_a_bare_broker_serves_every_services_topics():
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", "broker", "--partitions", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO,
    )
    try:
        bootstrap = proc.stdout.readline().strip()  # the address comes first
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        found = {name: len(meta.partitions) for name, meta in topics.items()}
        expected = {
            f"{name}.{suffix}": count or 3
            for name in available_services()
            for suffix, count in SERVICE_TOPICS
        }
        assert {name: found.get(name) for name in expected} == expected
        assert expected["triangles.updates"] == 3 and expected["triangles.dlq"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_run_against_a_missing_topic_is_one_line_naming_it(broker, unique, tmp_path):
    cfg = stream_config(tmp_path / "c.json", unique)
    proc = ivm("run", *run_args("reference", broker.bootstrap, cfg, state_dir=tmp_path / "s"), check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"ivmstream: error: topic {unique}.updates does not exist at {broker.bootstrap}: create it "
        "(`ivmstream broker` without --topic creates every service's topics; a running one takes "
        f"'create {unique}.updates 1' on its stdin; on Kafka: kafka-topics.sh --bootstrap-server "
        f"{broker.bootstrap} --create --topic {unique}.updates)"
    ]


def _wait_dead_letters(bootstrap: str, topic: str, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(read_dead_letters(bootstrap, topic)) < n:
        assert time.monotonic() < deadline, f"fewer than {n} dead letters in {topic}"
        time.sleep(0.5)


def test_dead_letters_are_read_with_one_command(broker, unique, tmp_path):
    cfg = stream_config(tmp_path / "c.json", unique, dead_letter_max_bytes=32)
    broker.create_topic(f"{unique}.updates", 1)
    broker.create_topic(f"{unique}.dlq", 3)  # the dead letters spread over partitions by their keys
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([json.dumps(GOOD), *BAD, json.dumps(GOOD)]) + "\n")
    ivm("produce", "--bootstrap", broker.bootstrap, "--topic", f"{unique}.updates", "--input", str(src))
    log = tmp_path / "w.log"
    worker = start_worker(*run_args("reference", broker.bootstrap, cfg, state_dir=tmp_path / "s"), log=log)
    try:
        _wait_dead_letters(broker.bootstrap, f"{unique}.dlq", len(BAD))
    finally:
        assert stop_worker(worker) == 0, log.read_text()
    assert "reference: 3 records refused (" in log.read_text()

    out = ivm("dlq", "reference", "--bootstrap", broker.bootstrap, "--config", str(cfg), "--json")
    letters = sorted((json.loads(line) for line in out.stdout.splitlines()), key=lambda d: d["source"])
    assert [(d["source"], d["reason"]) for d in letters] == [
        (f"{unique}.updates:0:1", "malformed-json"),
        (f"{unique}.updates:0:2", "unknown-relation"),
        (f"{unique}.updates:0:3", "malformed-json"),
    ]
    assert [d["size"] for d in letters] == [len(line) for line in BAD]
    assert [d["truncated_from"] for d in letters] == [None, len(BAD[1]), len(LONG)]
    assert letters[2]["value"] == LONG[:32] and all(d["detail"] for d in letters)
    assert out.stderr.strip() == f"3 dead letters in {unique}.dlq: malformed-json 2, unknown-relation 1"

    text = ivm("dlq", "reference", "--bootstrap", broker.bootstrap, "--config", str(cfg)).stdout
    heads = [line for line in text.splitlines() if not line.startswith("    ")]
    assert len(heads) == 3 and all(f" source {unique}.updates:0:" in h for h in heads)
    assert any(h.endswith(f"({len(LONG)} bytes, cut to 32)") for h in heads)

    args = ["dlq", "reference", "--bootstrap", broker.bootstrap, "--config", str(cfg), "--json", "--follow"]
    follow = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=REPO,
    )
    try:
        assert json.loads(follow.stdout.readline())["reason"] in {"malformed-json", "unknown-relation"}
    finally:
        follow.send_signal(signal.SIGINT)
        assert follow.wait(20) == 0


def test_dlq_of_a_topic_never_written_says_so(broker, unique, tmp_path):
    cfg = stream_config(tmp_path / "c.json", unique)
    proc = ivm("dlq", "reference", "--bootstrap", broker.bootstrap, "--config", str(cfg), check=False)
    assert proc.returncode == 1 and proc.stderr.startswith(f"ivmstream: error: no topic {unique}.dlq at ")
    assert len(proc.stderr.splitlines()) == 1
