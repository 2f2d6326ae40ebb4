"""Random order-book streams for the vwap tests: inserts of several copies, deletes of some copies of
a live tuple, partial executions, refused events, on tiny price domains so levels empty and come back."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from hypothesis import strategies as st

from ivmstream.events import UpdateEvent

COLUMNS = ("t", "id", "broker_id", "volume", "price")
op = st.tuples(
    st.sampled_from(["insert", "insert", "delete", "delete", "execute", "bad"]),
    st.integers(1, 6),  # price: a tiny domain, so levels empty and come back within a batch
    st.integers(1, 4),  # volume
    st.integers(1, 3),  # multiplicity
    st.integers(0, 3),  # order id: identical tuples recur
    st.integers(0, 999),  # which live tuple a delete picks
)


def book_events(ops, decimals: bool = False, asks: bool = False) -> list[UpdateEvent]:
    """Inserts of k copies, deletes of some copies of a live tuple, partial executions (delete, then
    the remainder at the same price), and refused events (absent deletes, zero volumes). With ``asks``,
    odd order ids go to the asks side."""
    live: Counter = Counter()

    def side(vals: tuple) -> str:
        return "asks" if asks and vals[1] % 2 else "bids"

    out = []
    for kind, price, vol, mult, oid, pick in ops:
        if decimals:
            price, vol = Decimal(price) / 4, Decimal(vol) / 2
        vals = (1, oid, oid, vol, price)
        present = sorted(k for k, m in live.items() if m)
        if kind in ("delete", "execute") and present:
            old = present[pick % len(present)]
            k = min(mult, live[old])
            live[old] -= k
            out.append(UpdateEvent(side(old), dict(zip(COLUMNS, old, strict=True)), -k, None))
            if kind == "execute" and old[3] > vol:
                rest = (*old[:3], old[3] - vol, old[4])
                live[rest] += k
                out.append(UpdateEvent(side(rest), dict(zip(COLUMNS, rest, strict=True)), k, None))
        elif kind == "bad":
            row = dict(zip(COLUMNS, vals, strict=True))
            out.append(
                UpdateEvent(
                    side(vals),
                    dict(row, volume=0) if pick % 2 else dict(row, price=99),
                    -1 + 2 * (pick % 2),
                    None,
                )
            )
        else:
            live[vals] += mult
            out.append(UpdateEvent(side(vals), dict(zip(COLUMNS, vals, strict=True)), mult, None))
    return out


def cut(events: list, sizes: list[int]) -> list[list]:
    """The events in consecutive batches of the given sizes (cycled), the last one what remains."""
    out, i, j = [], 0, 0
    while i < len(events):
        n = sizes[j % len(sizes)]
        out.append(events[i : i + n])
        i += n
        j += 1
    return out


def answer(engine) -> dict:
    """The engine's published answer without its counters."""
    return {k: v for k, v in engine.result().items() if k != "stats"}
