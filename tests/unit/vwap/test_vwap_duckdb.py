"""An independent SQL oracle: DuckDB evaluates each order-book query's SQL text on the live bag at
checkpoints of a random stream, and the RPAI engine's published answer must equal it."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest

from ivmstream.events import UpdateEvent
from ivmstream.services.vwap import sql
from ivmstream.services.vwap.batch_recompute import empty, shape
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import create_engine

BOOK_QUERIES = [q for q, info in QUERIES.items() if info.book]
COLUMNS = ("t", "id", "broker_id", "volume", "price")


def duckdb_answer(query: str, live: Counter) -> dict:
    con = duckdb.connect()
    for rel in ("bids", "asks"):
        con.execute(
            f"CREATE TABLE {rel} (__key VARCHAR, t BIGINT, id BIGINT, broker_id BIGINT, "
            "volume DECIMAL(18,3), price DECIMAL(18,3))"
        )
        rows = [("k", *vals) for (r, vals), m in live.items() if r == rel for _ in range(m)]
        if rows:
            con.executemany(f"INSERT INTO {rel} VALUES (?, ?, ?, ?, ?, ?)", rows)
    text = sql.render(query, sql.query_params(query, {"query": query}), keyed=True, dialect="duckdb")
    return shape(query, con.execute(text).fetchall()).get("k", empty({"query": query}))


@pytest.mark.parametrize("query", BOOK_QUERIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rpai_equals_duckdb_on_the_live_bag_at_checkpoints(query, seed):
    rng = random.Random(f"{query}/{seed}")
    engine = create_engine(query, "rpai")
    live: Counter = Counter()
    checked = 0
    for step in range(1, 121):
        present = [k for k, m in live.items() if m]
        if present and rng.random() < 0.4:
            rel, vals = rng.choice(sorted(present))
            delta = -1
        else:
            rel = rng.choice(("bids", "asks"))
            oid = rng.randrange(8)
            vals = (1, oid, oid % 10, rng.randint(1, 5), rng.randint(1, 12))
            delta = 1
        assert not engine.apply([UpdateEvent(rel, dict(zip(COLUMNS, vals, strict=True)), delta, None)])
        live[(rel, vals)] += delta
        if step % 12 == 0:
            got = {k: v for k, v in engine.result().items() if k != "stats"}
            assert got == duckdb_answer(query, live), (query, seed, step)
            checked += 1
    assert checked == 10
