"""The vwap engine's per-event loop: the bag ledger's checks and updates, and the netting of a batch per
price level (docs/vwap/algorithm.md §3.6), which is where a large batch spends its time.

``py_ledger_pass`` is the reference, in Python; ``_kernels.c`` compiles the same loop (built by setup.py
where a C compiler is present). The module exports the compiled loop when it is built and
``IVMSTREAM_PURE_PYTHON`` is not ``1``, else the Python one; both leave the same bag, the same netted
levels (down to their order), the same change log and the same refusals
(tests/unit/vwap/test_vwap_kernels.py). ``bag_entries`` writes a ledger's state entries for a checkpoint,
compiled the same way, to the same bytes.

``ACTIVE`` also decides the ``crosscheck`` plan's trees: ``_kernels.LevelTree`` where the kernels are
active (plans/finance_native.py), the Python RPAI trees otherwise.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ivmstream.sdk import EntryChange, UpdateEvent, json_bytes
from ivmstream.services.vwap.snapshot import bag_key

Bag = dict[str, dict[tuple[Any, ...], int]]
Netted = dict[str, dict[Any, list[Any]]]
Update = Callable[[str, Any, int], None]
# Per relation, the bag tuples touched, in first-touch order, each with whether it was live before its
# first touch (at the checkpoint the log starts from).
Touched = dict[str, dict[tuple[Any, ...], bool]]
Reject = Callable[[int, UpdateEvent, Any], None]
RowReject = Callable[[int, None, Any], None]  # a row given as columns has no event to hand over

# Set to 1 to run the Python loop even where the compiled one is built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"


def _settle(
    ledger: dict[tuple[Any, ...], int], changed: Touched | None, rel: str, vals: tuple[Any, ...], delta: int
) -> int | None:
    """One row's delta on its tuple's multiplicity, logged as touched (with whether it was live before):
    None once applied, or the multiplicity a refusal reports when the delta would make it negative (the
    compiled loops' ``settle``)."""
    have = ledger.get(vals, 0)
    new = have + delta
    if new < 0:
        return have
    if new:
        ledger[vals] = new
    else:
        del ledger[vals]
    if changed is not None:
        touched = changed.get(rel)
        if touched is None:
            touched = changed[rel] = {}
        touched.setdefault(vals, bool(have))
    return None


def py_ledger_pass(
    events: Sequence[UpdateEvent],
    bag: Bag,
    columns: Mapping[str, Sequence[str]],
    reads: frozenset[str],
    netted: Netted | None,
    update: Update | None,
    changed: Touched | None,
    book: bool,
    brokers: int | None,
    reject: Reject,
) -> int:
    """Apply ``events`` to the ledger ``bag`` in order; return the net change of its multiplicity.

    An event that cannot apply changes nothing and is handed to ``reject(i, event, have)``: ``have`` is
    the live multiplicity of a tuple the event deletes more copies of than there are, else ``None``
    (an unknown relation, or an order-book row with a volume <= 0 or a ``broker_id`` outside
    ``[0, brokers)``). A valid event's tuple is recorded in ``changed[relation]`` (unless ``changed`` is
    ``None``; a relation's dict is made at its first valid event), at its first touch with whether it
    was live before it; when its
    relation is one the plan reads, the event is added to ``netted[relation][price]`` as
    ``[Σ delta, Σ delta·volume]`` (a batch netted per level), or, without ``netted``, handed to
    ``update(relation, row, delta)``."""
    net = 0
    for i, ev in enumerate(events):
        rel = ev.relation
        ledger = bag.get(rel)
        if ledger is None:
            reject(i, ev, None)
            continue
        row = ev.row
        delta = ev.delta
        if book:
            if not row["volume"] > 0:
                reject(i, ev, None)
                continue
            if brokers is not None and not 0 <= row["broker_id"] < brokers:
                reject(i, ev, None)
                continue
        vals = tuple([row[c] for c in columns[rel]])
        have = _settle(ledger, changed, rel, vals, delta)
        if have is not None:
            reject(i, ev, have)
            continue
        net += delta
        if rel in reads:
            if netted is not None:
                levels = netted[rel]
                price = row["price"]
                acc = levels.get(price)
                if acc is None:
                    levels[price] = [delta, delta * row["volume"]]
                else:
                    acc[0] += delta
                    acc[1] += delta * row["volume"]
            elif update is not None:
                update(rel, row, delta)
    return net


def py_ledger_columns(
    rel: str,
    deltas: list[Any],
    lists: list[list[Any]],
    bag: Bag,
    columns: Mapping[str, Sequence[str]],
    reads: frozenset[str],
    netted: Netted | None,
    changed: Touched | None,
    book: bool,
    brokers: int | None,
    reject: RowReject,
) -> int:
    """``py_ledger_pass`` of one relation's rows given as columns (``lists[k]`` holds the values of
    ``columns[rel][k]``, ``deltas`` their deltas), with no plan ``update``: the same checks, ledger
    changes, change log and netting, in row order. ``reject(i, None, have)`` names the row's index
    among ``deltas``."""
    ledger = bag.get(rel)
    if ledger is None:
        for i in range(len(deltas)):
            reject(i, None, None)
        return 0
    cols = list(columns[rel])
    if len(lists) != len(cols) or any(len(col) != len(deltas) for col in lists):
        raise ValueError("one list per column of the relation, each as long as the deltas, expected")
    iv = cols.index("volume") if "volume" in cols else -1
    ip = cols.index("price") if "price" in cols else -1
    ib = cols.index("broker_id") if "broker_id" in cols else -1
    levels = netted[rel] if netted is not None and rel in reads else None
    net = 0
    for i, (delta, *values) in enumerate(zip(deltas, *lists, strict=True)):
        vals = tuple(values)
        if book:
            if not vals[iv] > 0:
                reject(i, None, None)
                continue
            if brokers is not None and not 0 <= vals[ib] < brokers:
                reject(i, None, None)
                continue
        have = _settle(ledger, changed, rel, vals, delta)
        if have is not None:
            reject(i, None, have)
            continue
        net += delta
        if levels is not None:
            price = vals[ip]
            acc = levels.get(price)
            if acc is None:
                levels[price] = [delta, delta * vals[iv]]
            else:
                acc[0] += delta
                acc[1] += delta * vals[iv]
    return net


Ledger = dict[tuple[Any, ...], int]
Touches = Mapping[tuple[Any, ...], bool] | None  # a relation's change log (Touched); None: every tuple
Entries = Callable[[Ledger, str, Touches], list[EntryChange]]


def py_bag_entries(ledger: Ledger, rel: str, touched: Touches) -> list[EntryChange]:
    """The state entries of relation ``rel``'s ledger: every live tuple (``touched`` None), or each
    touched tuple, with ``None`` for one no longer live (its entry is deleted). A tuple neither live now
    nor at the checkpoint the log starts from (inserted and deleted since) has no entry to delete and
    is left out: in an order book most orders come and go between two checkpoints."""
    if touched is None:
        return [("b", bag_key(rel, vals), json_bytes(m)) for vals, m in ledger.items()]
    out: list[EntryChange] = []
    for vals, was_live in touched.items():
        m = ledger.get(vals)
        if m or was_live:
            out.append(("b", bag_key(rel, vals), json_bytes(m) if m else None))
    return out


@functools.cache
def _key_prefix(rel: str) -> bytes:
    """The text every state key of ``rel`` starts with, ``["<rel>",`` as orjson writes it."""
    return json_bytes([rel])[:-1] + b","


def compiled_bag_entries(ledger: Ledger, rel: str, touched: Touches) -> list[EntryChange]:
    """``py_bag_entries`` in C: a tuple of ints in 64 bits written directly, any other through
    ``bag_key`` (decimals, strings, larger ints), as is a multiplicity beyond 64 bits."""
    return compiled.bag_entries(
        ledger, touched, "b", _key_prefix(rel), functools.partial(bag_key, rel), json_bytes
    )


try:  # the compiled loop (setup.py); without a C compiler the Python one above runs
    from ivmstream.services.vwap import _kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

ledger_pass: Callable[..., int] = py_ledger_pass
ledger_columns: Callable[..., int] = py_ledger_columns
bag_entries: Entries = py_bag_entries
if ACTIVE == "compiled":
    ledger_pass = compiled.ledger_pass
    ledger_columns = compiled.ledger_columns
    bag_entries = compiled_bag_entries

__all__ = [
    "ACTIVE",
    "bag_entries",
    "ledger_columns",
    "ledger_pass",
    "py_bag_entries",
    "py_ledger_columns",
    "py_ledger_pass",
]
