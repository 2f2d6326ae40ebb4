"""A key's batch of events as columns: per relation, its rows' positions in the batch, their deltas and
one list per column, for engines that work on whole columns (the optional ``apply_columns`` entry of
the Engine protocol, ``ivmstream.engine.ColumnarEngine``).

The columns are gathered with ``map`` over the batch, so the cost per event is a few C-level steps,
and an engine that takes them does no attribute or dictionary lookup per event. The order within a
relation is the batch's order; ``positions`` gives each row's index in the batch, which is what a
``Rejection`` names, so refusals are dead-lettered exactly as from ``apply``.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ivmstream.events.codec import UpdateEvent

_relation = attrgetter("relation")
_row = attrgetter("row")
_delta = attrgetter("delta")


class RelationColumns(NamedTuple):
    """One relation's rows of a batch, in batch order."""

    positions: Sequence[int]  # each row's index in the batch (what a Rejection names)
    deltas: list[int]
    columns: dict[str, list[Any]]  # column name -> its values, the relation's columns in schema order

    def __len__(self) -> int:
        return len(self.deltas)


class EventColumns(NamedTuple):
    """A batch of events (one key's, in log order) as columns per relation."""

    size: int  # events in the batch
    relations: dict[str, RelationColumns]  # in order of each relation's first event


def event_columns(events: Sequence[UpdateEvent]) -> EventColumns:
    """``events`` as columns. Every row of a relation holds the same columns (the codec validates them
    and builds rows in schema order), so the first row of each relation names them."""
    n = len(events)
    if n == 0:
        return EventColumns(0, {})
    names = list(map(_relation, events))
    first = names[0]
    if names.count(first) == n:  # the common case, checked in C: one relation
        return EventColumns(n, {first: _gather(events, range(n))})
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        at = positions.get(name)
        if at is None:
            positions[name] = [i]
        else:
            at.append(i)
    return EventColumns(
        n, {name: _gather(list(map(events.__getitem__, at)), at) for name, at in positions.items()}
    )


def _gather(events: Sequence[UpdateEvent], positions: Sequence[int]) -> RelationColumns:
    rows = list(map(_row, events))
    columns = {col: list(map(itemgetter(col), rows)) for col in rows[0]}
    return RelationColumns(positions, list(map(_delta, events)), columns)
