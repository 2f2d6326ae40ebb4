"""What the tests of the vwap service's finance baselines (``recompute`` and ``dbtoaster``) share: every
(query, params) shape, plans run in exact arithmetic, the check that both agree after every event, and
builders of order-book and R events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ivmstream.services.vwap.exact import exact_context
from ivmstream.services.vwap.plans import finance_dbtoaster, finance_recompute
from ivmstream.services.vwap.plans.finance_recompute import QUERIES

# Every (query, params) shape: SQ1 has two reconstructions.
CONFIGS: list[tuple[str, dict[str, Any]]] = [(q, {}) for q in QUERIES if q != "sq1"] + [
    ("sq1", {"variant": "a"}),
    ("sq1", {"variant": "b"}),
]
CONFIG_IDS = [q + p.get("variant", "") for q, p in CONFIGS]
RESULT_KEY = {q: ("vwap" if q.startswith("vwap") else q) for q in QUERIES}
BOOK_COLS = ("t", "id", "broker_id", "volume", "price")

Event = tuple[str, dict[str, Any], int]


def plans(query: str, params: dict[str, Any]) -> tuple[Any, Any]:
    return finance_dbtoaster.make_plan(query, params), finance_recompute.make_plan(query, params)


def bid(price: Any, volume: Any, broker: int = 0, oid: int = 0, t: int = 0) -> dict:
    return {"t": t, "id": oid, "broker_id": broker, "volume": volume, "price": price}


def run(plan: Any, events: Iterable[Event]) -> Any:
    with exact_context():
        for rel, row, mult in events:
            plan.update(rel, row, mult)
        return plan.result()


def assert_agree(query: str, params: dict[str, Any], events: list[Event]) -> None:
    """dbtoaster == recompute after every event (and the result has the contract's shape)."""
    dbt, rec = plans(query, params)
    with exact_context():
        want = rec.result()
        assert list(want) == [RESULT_KEY[query]] and dbt.result() == want
        for i, (rel, row, mult) in enumerate(events):
            dbt.update(rel, row, mult)
            rec.update(rel, row, mult)
            got, want = dbt.result(), rec.result()
            assert got == want, f"{query} {params} after event {i} ({rel} {row} x{mult}): {got} != {want}"


B = "bids"
A = "asks"


def ins(rel: str, price: Any, volume: Any, broker: int = 0, mult: int = 1, oid: int = 0) -> Event:
    return (rel, bid(price, volume, broker=broker, oid=oid), mult)


def r(a: Any, b: Any, mult: int = 1) -> Event:
    return ("R", {"a": a, "b": b}, mult)


def r_tuple(price: int, volume: int) -> tuple[int, int]:
    """R(a, b) from a drawn (price, volume): a is mostly 1 or 2 (sometimes 3), b is 1 or 2."""
    return (1 + price % 2 if price <= 10 else 3), 1 + volume % 2


def balancing(bag: dict[tuple, int], a: Any) -> tuple[Any, Any] | None:
    """The R tuple (a, d) after which group a holds exactly half of Σ b (Ex 2.1's equality), if d > 0."""
    total = sum(b * m for (_a, b), m in bag.items())
    group = sum(b * m for (ga, b), m in bag.items() if ga == a)
    d = total - 2 * group
    return (a, d) if d > 0 else None
