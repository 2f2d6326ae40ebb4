"""Relations of every vwap query: the order book, Ex. 2.1's R(a, b), and the TPC-H tables."""

from __future__ import annotations

from shared.events import Relation
from shared.events.tpch import TPCH_TABLES

# bids/asks(t, id, broker_id, volume, price): volume and price exact (ints = ticks, or decimals).
BOOK_COLUMNS = (("t", "int"), ("id", "int"), ("broker_id", "int"), ("volume", "exact"), ("price", "exact"))
BIDS = Relation("bids", BOOK_COLUMNS)
ASKS = Relation("asks", BOOK_COLUMNS)
EX21_R = Relation("R", (("a", "exact"), ("b", "exact")))


def tpch_relation(name: str) -> Relation:
    return Relation(name, TPCH_TABLES[name])
