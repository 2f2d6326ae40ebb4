"""What the vwap engine's columnar entry (``VwapEngine.apply_columns``) needs besides the ledger loop:
a batch given as columns turned back into events (for a batch the plan must see row by row), and the
change log's relations put in the order ``apply``'s single pass over a batch would enter them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ivmstream.sdk import EventColumns, Rejection, UpdateEvent
from ivmstream.services.vwap.kernels import Touched


def events_of(batch: EventColumns) -> list[UpdateEvent]:
    """A batch given as columns as the events it holds, in batch order."""
    out: list[Any] = [None] * batch.size
    for rel, part in batch.relations.items():
        names = list(part.columns)
        rows = zip(*part.columns.values(), strict=True) if names else [()] * len(part)
        for at, delta, values in zip(part.positions, part.deltas, rows, strict=True):
            out[at] = UpdateEvent(rel, dict(zip(names, values, strict=True)), delta, None)
    return out


def log_in_batch_order(
    changed: Touched, fresh: Sequence[str], batch: EventColumns, rejections: Sequence[Rejection]
) -> None:
    """Put the relations a batch entered into the change log in the order of their first valid rows, as
    ``apply``'s single pass over the batch enters them (the log's order is the checkpoint entries')."""
    refused = {r.index for r in rejections}

    def first_valid(rel: str) -> int:
        return next(at for at in batch.relations[rel].positions if at not in refused)

    for rel in sorted((rel for rel in fresh if rel in changed), key=first_valid):
        changed[rel] = changed.pop(rel)
