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

from ivmstream.events.codec import EventCodec, EventError, UpdateEvent

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


# decode_columns: the refused records' (index, error), each key's EventColumns, each key's record indexes
DecodedColumns = tuple[list[tuple[int, EventError]], dict[str, EventColumns], dict[str, list[int]]]


def decode_columns(
    codec: EventCodec, values: Sequence[bytes | None], decimal_text: bool = False
) -> DecodedColumns:
    """``codec.decode_grouped`` for engines that take columns: the refused records' ``(index, error)``,
    each key's events as ``EventColumns``, and each key's record indexes in its batch order. The
    compiled decoder writes the columns without an event per record (``EventCodec.column_lists``); the
    Python path gathers the same columns from the events ``decode_grouped`` makes.

    ``decimal_text`` (an engine's ``ColumnarEngine.decimal_text``): where the compiled decoder reads a
    decimal written as a plain decimal string, the column holds that string, which ``Decimal()`` reads
    exactly as the value; other decimals (and every one on the Python path) are ``Decimal`` objects."""
    lists = codec.column_lists(values, decimal_text)
    if lists is not None:
        errors, groups = lists
        names = {name: rel.column_names for name, rel in codec.schema.relations.items()}
        return errors, *columns_of_lists(groups, names)
    decoded, grouped, _ = codec.decode_grouped(values)
    refused = [(i, item) for i, item in enumerate(decoded) if isinstance(item, EventError)]
    return refused, *columns_of_events(decoded, grouped)


def columns_of_lists(
    groups: dict[str, dict[str, list[list[Any]]]], names: dict[str, tuple[str, ...]]
) -> tuple[dict[str, EventColumns], dict[str, list[int]]]:
    """The compiled decoder's columns (``groups[key][relation] = [indexes, deltas, column 0, ...]``)
    as each key's ``EventColumns`` and its record indexes in batch order."""
    batches: dict[str, EventColumns] = {}
    records: dict[str, list[int]] = {}
    for key, relations in groups.items():
        if len(relations) == 1:
            [(rel, lists)] = relations.items()
            at = lists[0]
            parts = {
                rel: RelationColumns(range(len(at)), lists[1], dict(zip(names[rel], lists[2:], strict=True)))
            }
            records[key] = at
        else:  # each relation's rows by their position among the key's records
            at = sorted(i for lists in relations.values() for i in lists[0])
            rank = {i: n for n, i in enumerate(at)}
            parts = {
                rel: RelationColumns(
                    list(map(rank.__getitem__, lists[0])),
                    lists[1],
                    dict(zip(names[rel], lists[2:], strict=True)),
                )
                for rel, lists in relations.items()
            }
            records[key] = at
        batches[key] = EventColumns(len(records[key]), parts)
    return batches, records


def columns_of_events(
    decoded: Sequence[object], groups: dict[str, list[UpdateEvent]]
) -> tuple[dict[str, EventColumns], dict[str, list[int]]]:
    """``decode_grouped``'s groups as each key's ``EventColumns`` and its record indexes in batch order."""
    index = {id(item): i for i, item in enumerate(decoded)}
    batches = {key: event_columns(events) for key, events in groups.items()}
    records = {key: [index[id(event)] for event in events] for key, events in groups.items()}
    return batches, records


def events_of(batch: EventColumns, key: str | None) -> list[UpdateEvent]:
    """``batch`` as the events it was gathered from, in batch order (for an engine without columns)."""
    out: list[UpdateEvent | None] = [None] * batch.size
    for rel, part in batch.relations.items():
        names = list(part.columns)
        rows = zip(*part.columns.values(), strict=True) if names else [()] * len(part)
        for at, delta, values in zip(part.positions, part.deltas, rows, strict=True):
            out[at] = UpdateEvent(rel, dict(zip(names, values, strict=True)), delta, key)
    return out  # type: ignore[return-value]  # every position filled
