"""Batches applied as batches (netted per price level, docs/vwap/algorithm.md §3.6) give exactly the
answer of the literal nested-loop oracle fed one event at a time, after every batch: random books with
tiny price domains, duplicates, multiplicities above one, deletes, levels emptied and re-created
within a batch, refused events, batches of one event up to the whole stream. DuckDB re-evaluates the
SQL on the live bag after every batch of a longer seeded stream."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivmstream.services.vwap import sql
from ivmstream.services.vwap.batch_recompute import empty, shape
from ivmstream.services.vwap.engine import create_engine
from tests.unit.vwap.book_streams import COLUMNS, answer, book_events, cut, op

NETTED = [("vwap", "rpai"), ("vwap-paper", "rpai"), ("nq1", "rpai"), ("nq2", "rpai")]
NETTED += [("vwap", "crosscheck"), ("vwap-paper", "crosscheck")]


def check_trees(engine) -> None:
    for tree in engine.plan.trees():
        tree.check()


def run_batched(query: str, strategy: str, batches: list[list]) -> None:
    engine = create_engine(query, strategy)
    oracle = create_engine(query, "recompute")
    for batch in batches:
        want_rej = []
        for i, ev in enumerate(batch):  # the oracle sees one event at a time
            want_rej += [(i, r.code) for r in oracle.apply([ev])]
        assert [(r.index, r.code) for r in engine.apply(batch)] == want_rej
        assert answer(engine) == answer(oracle), (query, strategy, len(batch))
        check_trees(engine)
    assert engine.snapshot().replace(b'"strategy":"' + strategy.encode(), b"") == oracle.snapshot().replace(
        b'"strategy":"recompute', b""
    )


@pytest.mark.parametrize(("query", "strategy"), NETTED)
@given(ops=st.lists(op, max_size=60), sizes=st.lists(st.integers(1, 25), min_size=1, max_size=5))
def test_netted_batches_equal_the_per_event_oracle(query, strategy, ops, sizes):
    run_batched(query, strategy, cut(book_events(ops), sizes))


@pytest.mark.parametrize(("query", "strategy"), NETTED)
@given(ops=st.lists(op, max_size=80))
def test_one_batch_of_everything_and_batches_of_one(query, strategy, ops):
    events = book_events(ops)
    run_batched(query, strategy, [events])
    run_batched(query, strategy, cut(events, [1]))


@pytest.mark.parametrize(
    ("query", "strategy"), [("vwap", "rpai"), ("vwap-paper", "crosscheck"), ("nq1", "rpai")]
)
@given(ops=st.lists(op, max_size=50), sizes=st.lists(st.integers(1, 20), min_size=1, max_size=3))
def test_netted_batches_with_exact_decimals(query, strategy, ops, sizes):
    run_batched(query, strategy, cut(book_events(ops, decimals=True), sizes))


def duckdb_answer(query: str, live: Counter) -> dict:
    con = duckdb.connect()
    for rel in ("bids", "asks"):
        con.execute(
            f"CREATE TABLE {rel} (__key VARCHAR, t BIGINT, id BIGINT, broker_id BIGINT, "
            "volume DECIMAL(18,3), price DECIMAL(18,3))"
        )
    rows = [("k", *vals) for vals, m in live.items() for _ in range(m)]
    if rows:
        con.executemany("INSERT INTO bids VALUES (?, ?, ?, ?, ?, ?)", rows)
    text = sql.render(query, sql.query_params(query, {"query": query}), keyed=True, dialect="duckdb")
    return shape(query, con.execute(text).fetchall()).get("k", empty({"query": query}))


@pytest.mark.parametrize(("query", "strategy"), NETTED)
def test_netted_batches_equal_duckdb_after_every_batch(query, strategy):
    rng = random.Random(f"batches/{query}/{strategy}")
    ops = [
        (
            rng.choice(["insert", "insert", "delete", "execute"]),
            rng.randint(1, 30),
            rng.randint(1, 9),
            rng.randint(1, 2),
            rng.randrange(6),
            rng.randrange(1000),
        )
        for _ in range(600)
    ]
    events = book_events(ops)
    engine = create_engine(query, strategy)
    live: Counter = Counter()
    for batch in cut(events, [1, 7, 150, 2, 60]):
        assert not engine.apply(batch)
        for ev in batch:
            live[tuple(ev.row[c] for c in COLUMNS)] += ev.delta
        assert answer(engine) == duckdb_answer(query, live), (query, strategy)
