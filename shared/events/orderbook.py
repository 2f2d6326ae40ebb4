"""The DBToaster order-book adaptor: B/S/E/D/F messages to bids/asks tuple updates.

Semantics follow DBToaster's finance experiments exactly (they reproduce its published VWAP values):
B/S insert an order into bids/asks (``broker_id = id mod brokers``); E executes volume of a live
order (delete it, re-insert the remainder with every other field unchanged, including ``t``); D/F
delete a live order; unknown ids and X/C/T are ignored. Ids are looked up in bids before asks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events.source import SourceRecord

BOOKS = ("bids", "asks", "both")
_IGNORED = frozenset("XCT")


def _num(text: str, what: str) -> int | float:
    s = text.strip()
    # Python's int()/float() also accept "1_000", non-ASCII digits and nan/inf: none is a trace number.
    if "_" not in s and s.isascii():
        try:
            i = int(s)
        except ValueError:
            pass
        else:
            if -(2**63) <= i <= 2**64 - 1:  # what orjson can encode
                return i
            raise ValueError(f"{what} {s!r} is outside the 64-bit integer range")
        try:
            f = float(s)
        except ValueError:
            pass
        else:
            if math.isfinite(f):
                return f
    raise ValueError(f"{what} {s!r} is not a number")


class OrderBookAdaptor:
    """Keeps live orders per side and emits update events (dicts) for each message."""

    def __init__(self, book: str = "bids", brokers: int = 10) -> None:
        if book not in BOOKS:
            raise ValueError(f"book must be one of {', '.join(BOOKS)}, got {book!r}")
        if brokers < 1:
            raise ValueError(f"brokers must be a positive integer, got {brokers}")
        self.brokers = brokers
        self.wanted = {"bids": book in ("bids", "both"), "asks": book in ("asks", "both")}
        self.live: dict[str, dict[Any, dict[str, Any]]] = {"bids": {}, "asks": {}}

    def feed_line(self, line: str) -> list[dict[str, Any]]:
        parts = line.strip().split(",")
        if len(parts) != 5:
            raise ValueError(f"expected 5 fields t,id,action,volume,price, got {len(parts)}")
        t_s, id_s, action, vol_s, price_s = parts
        return self.feed(
            _num(t_s, "t"), _num(id_s, "id"), action.strip(), _num(vol_s, "volume"), _num(price_s, "price")
        )

    def feed(self, t: Any, oid: Any, action: str, volume: Any, price: Any) -> list[dict[str, Any]]:
        if action == "B" or action == "S":
            side = "bids" if action == "B" else "asks"
            if not self.wanted[side]:
                return []
            row = {"t": t, "id": oid, "broker_id": oid % self.brokers, "volume": volume, "price": price}
            # As in DBToaster, a re-used live id overwrites the map entry without retracting the old tuple.
            self.live[side][oid] = row
            return [{"relation": side, "row": row, "delta": 1}]
        if action == "E":
            side, row = self._find(oid)
            if row is None:
                return []
            out = [{"relation": side, "row": row, "delta": -1}]
            remaining = row["volume"] - volume
            if remaining > 0:
                new = dict(row, volume=remaining)
                self.live[side][oid] = new
                out.append({"relation": side, "row": new, "delta": 1})
            else:
                del self.live[side][oid]
            return out
        if action == "D" or action == "F":
            side, row = self._find(oid)
            if row is None:
                return []
            del self.live[side][oid]
            return [{"relation": side, "row": row, "delta": -1}]
        if action in _IGNORED:
            return []
        raise ValueError(f"unknown order-book action {action!r} (expected B, S, E, D, F, X, C or T)")

    def _find(self, oid: Any) -> tuple[str, dict[str, Any] | None]:
        row = self.live["bids"].get(oid)
        if row is not None:
            return "bids", row
        return "asks", self.live["asks"].get(oid)


def read_orderbook(
    path: str | Path, *, book: str = "bids", brokers: int = 10, key: str | None = None
) -> Iterator[SourceRecord]:
    """DBToaster finance traces (``t,id,action,volume,price``) through the adaptor; ``key`` (constant)
    becomes every record's key. A line the adaptor refuses becomes an error record."""
    adaptor = OrderBookAdaptor(book=book, brokers=brokers)  # bad options raise here, not on iteration
    return _orderbook_records(Path(path), adaptor, key.encode() if key is not None else None)


def _orderbook_records(path: Path, adaptor: OrderBookAdaptor, key: bytes | None) -> Iterator[SourceRecord]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield SourceRecord(lineno, raw.strip(), key, error=f"not valid UTF-8: {exc}")
                continue
            try:
                events = adaptor.feed_line(line)
            except ValueError as exc:
                yield SourceRecord(lineno, raw.strip(), key, error=str(exc))
                continue
            for ev in events:
                yield SourceRecord(lineno, orjson.dumps(ev), key, relation=ev["relation"])
