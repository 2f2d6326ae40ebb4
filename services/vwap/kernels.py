"""The vwap engine's per-event loop: the bag ledger's checks and updates, and the netting of a batch per
price level (docs/vwap/algorithm.md §3.6), which is where a large batch spends its time.

``py_ledger_pass`` is the reference, in Python; ``_kernels.c`` compiles the same loop (built by setup.py
where a C compiler is present). The module exports the compiled loop when it is built and
``IVMSTREAM_PURE_PYTHON`` is not ``1``, else the Python one; both leave the same bag, the same netted
levels (down to their order), the same change log and the same refusals
(tests/unit/vwap/test_vwap_kernels.py).

``ACTIVE`` also decides the ``crosscheck`` plan's trees: ``_kernels.LevelTree`` where the kernels are
active (plans/finance_native.py), the Python RPAI trees otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ivmstream.sdk import UpdateEvent

Bag = dict[str, dict[tuple[Any, ...], int]]
Netted = dict[str, dict[Any, list[Any]]]
Update = Callable[[str, Any, int], None]
Touched = dict[str, dict[tuple[Any, ...], None]]  # per relation, the bag tuples touched, in first-touch order
Reject = Callable[[int, UpdateEvent, Any], None]

# Set to 1 to run the Python loop even where the compiled one is built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"


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
    ``None``; a relation's dict is made at its first valid event); when its
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
        have = ledger.get(vals, 0)
        new = have + delta
        if new < 0:
            reject(i, ev, have)
            continue
        if new:
            ledger[vals] = new
        else:
            del ledger[vals]
        if changed is not None:
            touched = changed.get(rel)
            if touched is None:
                touched = changed[rel] = {}
            touched[vals] = None
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


try:  # the compiled loop (setup.py); without a C compiler the Python one above runs
    from ivmstream.services.vwap import _kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

ledger_pass: Callable[..., int] = py_ledger_pass
if ACTIVE == "compiled":
    ledger_pass = compiled.ledger_pass

__all__ = ["ACTIVE", "ledger_pass", "py_ledger_pass"]
