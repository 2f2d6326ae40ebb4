"""The vwap service through the real runtime: two order books keyed by symbol, results equal to the
offline replay and to the literal oracle, and two workers splitting the books (kill -9 and the other
generic checks are the conformance suite's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import (
    catch_up_with_workers,
    offline_results,
    published_results,
    stream_config,
    trickle,
    worker_args,
)

from ivmstream.events import UpdateEvent
from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.services.vwap.engine import create_engine

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


def config(tmp_path: Path, unique: str, query: str, **extra: Any) -> Path:
    """The RPAI config of ``query``, keyed by symbol, on the test's own topics."""
    return stream_config(
        tmp_path / f"{query}.json", unique, query=query, strategy="rpai", key_field="symbol", **extra
    )


def test_mst_stream_equals_replay_and_oracle(broker, redis_server, unique, tmp_path, books):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, "mst", checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", books, "symbol", 0.0)
    args = worker_args("vwap", broker, redis_server, unique, tmp_path, cfg)
    catch_up_with_workers(args, broker, unique, tmp_path)
    published = {
        k: answer_of(r) for k, r in published_results(redis_server.url, f"{unique}.results", "vwap").items()
    }
    replayed = {k: answer_of(r) for k, r in offline_results(cfg, books, service="vwap").items()}
    assert published == replayed == oracle(books, "mst")
    assert published["ACME"]["mst"], "the standard trace has missed trades"


def test_two_workers_split_the_books(broker, redis_server, unique, tmp_path, books):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, "psp", checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", books, "symbol", 0.0)
    args = worker_args("vwap", broker, redis_server, unique, tmp_path, cfg, "p")
    catch_up_with_workers(args, broker, unique, tmp_path, workers=2, group="p")
    union = published_results(redis_server.url, f"{unique}.results", "vwap")
    assert {k: answer_of(r) for k, r in union.items()} == oracle(books, "psp")
    assert set(union) == set(BOOKS)
