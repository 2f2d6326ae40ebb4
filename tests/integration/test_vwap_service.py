"""The vwap service through the real runtime: two order books keyed by symbol, results equal to the
offline replay and to the literal oracle, kill -9 mid-stream, and two workers splitting the books."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import orjson
import pytest
from helpers import offline_results, published_results, start_worker, stop_worker, trickle, write_config

from services.vwap.engine import create_engine
from shared.events import UpdateEvent
from shared.events.orderbook import OrderBookAdaptor
from shared.runtime.progress import wait_caught_up

DATA = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data"
BOOKS = {"ACME": DATA / "finance-standard.csv", "TINY": DATA / "finance-tiny.csv"}


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """Both sides of two DBToaster traces as jsonl events, interleaved, each row carrying its symbol."""
    streams = []
    for symbol, path in BOOKS.items():
        adaptor = OrderBookAdaptor(book="both")
        events = []
        for line in path.read_text().splitlines():
            for ev in adaptor.feed_line(line):
                ev["row"] = dict(ev["row"], symbol=symbol)
                events.append(ev)
        streams.append(events)
    out = tmp_path_factory.mktemp("vwap") / "books.jsonl"
    lines = []
    longest = max(len(s) for s in streams)
    for i in range(longest):
        lines += [orjson.dumps(s[i]) for s in streams if i < len(s)]
    out.write_bytes(b"\n".join(lines) + b"\n")
    return out


def oracle(path: Path, query: str) -> dict:
    """An independent implementation (the DBToaster-style baseline, itself checked against the literal
    nested loops after every event in the unit tests), per symbol, on the same events."""
    engines: dict[str, object] = {}
    for line in path.read_bytes().splitlines():
        ev = orjson.loads(line)
        row = dict(ev["row"])
        symbol = row.pop("symbol")
        e = engines.setdefault(symbol, create_engine(query, "dbtoaster"))
        e.apply([UpdateEvent(ev["relation"], row, ev["delta"], symbol)])
    return {k: answer_of(e.result()) for k, e in engines.items()}


def answer_of(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "stats"}


def config(tmp_path, unique, query, **extra):
    return write_config(
        tmp_path / f"{query}.json",
        query=query,
        strategy="rpai",
        key_field="symbol",
        input_topic=f"{unique}.updates",
        output_topic=f"{unique}.results",
        dlq_topic=f"{unique}.dlq",
        **extra,
    )


def worker_args(broker, redis_server, unique, tmp_path, cfg, group="g"):
    return [
        "vwap",
        "--bootstrap",
        broker.bootstrap,
        "--config",
        str(cfg),
        "--group",
        f"{unique}-{group}",
        "--state-dir",
        str(tmp_path / "s"),
        "--redis",
        redis_server.url,
    ]


def test_mst_stream_equals_replay_and_oracle(broker, redis_server, unique, tmp_path, books):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, "mst", checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", books, "symbol", 0.0)
    worker = start_worker(*worker_args(broker, redis_server, unique, tmp_path, cfg), log=tmp_path / "w.log")
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-g", f"{unique}.updates")
    finally:
        assert stop_worker(worker) == 0, (tmp_path / "w.log").read_text()
    published = {
        k: answer_of(r) for k, r in published_results(redis_server.url, f"{unique}.results", "vwap").items()
    }
    replayed = {k: answer_of(r) for k, r in offline_results(cfg, books, service="vwap").items()}
    assert published == replayed == oracle(books, "mst")
    assert published["ACME"]["mst"], "the standard trace has missed trades"


def test_kill9_mid_stream_then_restart_equals_uninterrupted(broker, redis_server, unique, tmp_path, books):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, "vwap", batch_size=50, checkpoint_interval=0.3, session_timeout_ms=6000)
    args = worker_args(broker, redis_server, unique, tmp_path, cfg)
    feeder = threading.Thread(
        target=trickle, args=(broker.bootstrap, f"{unique}.updates", books, "symbol", 3.0)
    )
    feeder.start()
    try:
        for _ in range(2):
            worker = start_worker(*args, log=tmp_path / "w.log")
            time.sleep(1.3)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
        feeder.join()
        worker = start_worker(*args, log=tmp_path / "w.log")
        wait_caught_up(broker.bootstrap, f"{unique}-g", f"{unique}.updates", timeout=120)
        assert stop_worker(worker) == 0, (tmp_path / "w.log").read_text()
    finally:
        feeder.join()
    published = published_results(redis_server.url, f"{unique}.results", "vwap")
    expected = offline_results(cfg, books, service="vwap")
    assert {k: answer_of(r) for k, r in published.items()} == oracle(books, "vwap")
    for key, result in published.items():
        # No event was applied twice or lost: the ledger-derived counters match the replay exactly.
        assert result["stats"]["events"] == expected[key]["stats"]["events"]
        assert result["stats"]["levels"] == expected[key]["stats"]["levels"]


def test_two_workers_split_the_books(broker, redis_server, unique, tmp_path, books):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, "psp", checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", books, "symbol", 0.0)
    workers = [
        start_worker(
            *worker_args(broker, redis_server, unique, tmp_path, cfg, "p"), log=tmp_path / f"w{i}.log"
        )
        for i in range(2)
    ]
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-p", f"{unique}.updates")
    finally:
        codes = [stop_worker(w) for w in workers]
    assert codes == [0, 0]
    union = published_results(redis_server.url, f"{unique}.results", "vwap")
    assert {k: answer_of(r) for k, r in union.items()} == oracle(books, "psp")
    assert set(union) == set(BOOKS)
