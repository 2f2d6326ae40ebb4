"""The vwap benchmark's constants, the finance trace through the order-book adaptor, and what it runs:
the ``VwapEngine`` per strategy and DuckDB as an independent peer over the live book.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.limits import Watchdog
from bench.lib.report import REPO as ROOT
from ivmstream.events import UpdateEvent
from ivmstream.events.orderbook import OrderBookAdaptor
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.engine import VwapEngine

TRACE = ROOT / "bench" / "data" / "finance-big.csv"
RESULTS = ROOT / "bench" / "results"
FINANCE_QUERIES = ("vwap", "vwap-paper", "mst", "psp", "nq1", "sq1", "sq2", "nq2")
VWAP_FORMS = ("vwap", "vwap-paper")
NONE = "\u2013"  # an en dash: no figure
TIMES = "\u00d7"
ORDER = ("rpai", "crosscheck", "dbtoaster", "recompute", "duckdb", "auto")
BOOK_COLUMNS = ("t", "id", "broker_id", "volume", "price")
Event = tuple[str, dict[str, Any], int]


def load_trace(path: Path, book: str, limit: int | None = None) -> list[Event]:
    """The trace's events through the order-book adaptor; with ``limit``, only its first ``limit``
    events (the file is read no further than they need)."""
    adaptor = OrderBookAdaptor(book=book)
    out: list[Event] = []
    with open(path) as fh:
        for line in fh:
            for ev in adaptor.feed_line(line):
                out.append((ev["relation"], ev["row"], ev["delta"]))
            if limit is not None and len(out) >= limit:
                return out[:limit]
    return out


def live_levels(events: Sequence[Event], n: int) -> dict[str, int]:
    """D: distinct live prices per book side after the first n events."""
    live: dict[tuple[str, Any], int] = {}
    for rel, row, m in events[:n]:
        k = (rel, row["price"])
        live[k] = live.get(k, 0) + m
    out = {"bids": 0, "asks": 0}
    for (rel, _p), c in live.items():
        if c:
            out[rel] += 1
    return out


def answer(result: dict[str, Any]) -> Any:
    return {k: v for k, v in result.items() if k != "stats"}


def strategies_of(query: str) -> list[str]:
    return [s for s in ORDER if s == "duckdb" or s in QUERIES[query].strategies]


def default_strategy() -> str:
    from ivmstream.services.vwap.options import OPTIONS

    return str(OPTIONS["strategy"].default)


# --- the peer: DuckDB over the live book ----------------------------------------------------------


class DuckDBPeer:
    """The live book as a bag, and the query's SQL evaluated by DuckDB over it once per batch: an
    implementation that shares nothing with the engine's plans (docs/vwap/algorithm.md §5.4)."""

    def __init__(self, query: str) -> None:
        import duckdb

        from ivmstream.services.vwap import sql

        self.query = query
        self.live: Counter = Counter()
        self.con = duckdb.connect()
        for rel in ("bids", "asks"):
            self.con.execute(
                f"CREATE TABLE {rel} (__key VARCHAR, t BIGINT, id BIGINT, broker_id BIGINT, "
                "volume HUGEINT, price HUGEINT)"  # the trace's integers; MST's sums overflow 64 bits
            )
        self.text = sql.render(query, sql.query_params(query, {"query": query}), keyed=True, dialect="duckdb")
        self.reads = QUERIES[query].reads

    def apply(self, batch: Sequence[Event]) -> None:
        live = self.live
        for rel, row, m in batch:
            live[(rel, tuple(row[c] for c in BOOK_COLUMNS))] += m

    def result(self) -> dict[str, Any]:
        import pandas as pd  # type: ignore[import-untyped]

        from ivmstream.services.vwap.batch_recompute import empty, shape

        for rel in self.reads:
            rows = [("k", *vals) for (r, vals), m in self.live.items() if r == rel for _ in range(m)]
            frame = pd.DataFrame(rows, columns=["__key", *BOOK_COLUMNS])  # noqa: F841 (read by DuckDB)
            self.con.execute(f"DELETE FROM {rel}")
            if rows:
                self.con.execute(f"INSERT INTO {rel} SELECT * FROM frame")
        got = shape(self.query, self.con.execute(self.text).fetchall())
        return got.get("k", empty({"query": self.query}))

    def answer_within(self, seconds: float) -> dict[str, Any] | None:
        """The result, or None when it took longer than ``seconds`` (DuckDB is asked to interrupt its
        query then; whatever it was doing at that moment, the answer counts as stopped)."""
        import duckdb

        with _WATCHDOG.limit(seconds, self.con.interrupt) as fired:
            try:
                got = self.result()
            except duckdb.InterruptException:
                return None
        return None if fired() else got


_WATCHDOG = Watchdog()  # interrupts the peer's query when one batch runs too long


def runner(query: str, strategy: str) -> Any:
    return DuckDBPeer(query) if strategy == "duckdb" else VwapEngine(query, strategy)


def feed(target: Any, batch: Sequence[Event]) -> None:
    if isinstance(target, DuckDBPeer):
        target.apply(batch)
    else:
        rejected = target.apply([UpdateEvent(rel, row, m, None) for rel, row, m in batch])
        assert not rejected, rejected[:3]
