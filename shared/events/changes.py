"""Change records (CDC) as update events: the model every change format decodes into, and the step that
turns a decoded change into zero, one or two update events.

A format's decoder (``debezium``, ``binlog``, ``upsert``) reads one record into a ``Change`` per row
(the row's before- and after-image), a ``Truncate``, a ``Skip`` (tombstones, schema messages:
counted, never dead-lettered) or an ``EventError``. ``ChangeEvents`` then projects and validates the
images against the view's relations and makes the events: an insert, a delete, or an update as one
atomic pair (delete before, insert after). With ``images`` (upsert mode) the retraction comes from the
last image of the row's primary key, kept in an ``ImageTable`` that the runtime checkpoints with the
view's state: a duplicate record changes nothing, and a source without before-images still retracts
exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ivmstream.events.codec import COLUMN_TYPES, EventCodec, EventError, Schema, UpdateEvent
from ivmstream.events.encoding import json_bytes

# The value Debezium writes for a column it could not read (a TOASTed column not in the WAL record).
UNAVAILABLE = "__debezium_unavailable_value"

CHANGE_FORMATS = ("debezium-json", "maxwell-json", "canal-json", "upsert-json")
NATIVE = "native"


@dataclass(frozen=True, slots=True)
class Change:
    """One row's change: its image before (None: not in the record) and after (None: deleted).
    ``identity``: the primary key as text, where the record names it (upsert mode keys images by it);
    ``update``: the row existed before, so a change without a before-image cannot retract it."""

    relation: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    identity: str | None = None
    update: bool = False


@dataclass(frozen=True, slots=True)
class Truncate:
    """Every row of ``relation`` deleted."""

    relation: str | None


@dataclass(frozen=True, slots=True)
class Skip:
    """A record that carries no row change (counted by ``kind``)."""

    kind: str


Decoded = list[Change] | Truncate | Skip | EventError


@dataclass(frozen=True)
class ChangeSpec:
    """How one input's records are read: its format, the relation (None: from the record's table), the
    primary-key columns (None: the record key), whether undeclared columns are dropped, and whether the
    last image of each row is kept (upsert mode; always for upsert-json)."""

    format: str
    relation: str | None = None
    primary_key: tuple[str, ...] | None = None
    project: bool = False
    images: bool = False


def identity_of(
    key: bytes | None, row: Mapping[str, Any] | None, primary_key: tuple[str, ...] | None
) -> str | None:
    """A row's primary key as text: the record key (the text Debezium, Maxwell and upsert producers
    write, canonicalised when it is JSON), or for records without one the row's ``primary_key`` columns."""
    if key is None:
        if primary_key is None or row is None or any(c not in row for c in primary_key):
            return None
        return orjson.dumps([row[c] for c in primary_key], default=str).decode()
    try:
        parsed = orjson.loads(key)
    except orjson.JSONDecodeError:
        return key.decode("utf-8", "replace")
    if isinstance(parsed, dict) and "payload" in parsed and "schema" in parsed:
        parsed = parsed["payload"]  # a schema-wrapped Debezium key
    return orjson.dumps(parsed, option=orjson.OPT_SORT_KEYS).decode()


def load_record(value: bytes) -> Any:
    """The record's JSON, or ``malformed-json``."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise EventError("malformed-json", f"not valid JSON: {exc}") from None


class ImageTable:
    """The last image of each row (by relation and primary key) of an input in upsert mode, with the
    entries changed since they were last taken: the runtime stores them beside the engines' state in
    the same atomic checkpoint (map ``images``). Changes are recorded only once a checkpoint has taken
    the table (as an engine's, ``ivmstream.engine.IncrementalEngine``): ``replay`` and bootstraps keep
    no log."""

    MAP = "images"

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._changed: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._logging = False  # whether ``_changed`` is kept: once a checkpoint has taken the rows
        # With a journal (a list), each put records the image it replaced, so that a caller applying
        # records through an engine can take back the images of one the engine refuses (``rollback``).
        self.journal: list[tuple[str, str, dict[str, Any] | None]] | None = None

    def get(self, relation: str, identity: str) -> dict[str, Any] | None:
        return self.rows.get((relation, identity))

    def put(self, relation: str, identity: str, row: dict[str, Any] | None) -> None:
        where = (relation, identity)
        if self.journal is not None:
            self.journal.append((relation, identity, self.rows.get(where)))
        self._set(where, row)

    def _set(self, where: tuple[str, str], row: dict[str, Any] | None) -> None:
        """Keep ``row`` (None: forget the image) and mark it changed, for the next checkpoint."""
        if row is None:
            self.rows.pop(where, None)
        else:
            self.rows[where] = row
        if self._logging:
            self._changed[where] = row

    def savepoint(self) -> int:
        """Where the journal is now (it must be kept: ``journal`` a list)."""
        assert self.journal is not None
        return len(self.journal)

    def rollback(self, to: int = 0) -> None:
        """The images as they were at savepoint ``to``."""
        journal = self.journal
        assert journal is not None
        while len(journal) > to:
            relation, identity, row = journal.pop()
            self._set((relation, identity), row)

    def of_relation(self, relation: str) -> list[tuple[str, dict[str, Any]]]:
        return [(ident, row) for (rel, ident), row in self.rows.items() if rel == relation]

    def changed_entries(self) -> list[tuple[str, bytes, bytes | None]]:
        """``(map, entry, value)`` of the rows changed since the last call (value None: deleted); at the
        first call every row (nothing was recorded before it)."""
        if not self._logging:
            return [(m, k, v) for m, k, v in self.all_entries()]
        out = [
            (self.MAP, json_bytes(list(where)), None if row is None else json_bytes(row))
            for where, row in self._changed.items()
        ]
        self._changed.clear()
        return out

    def all_entries(self) -> Iterator[tuple[str, bytes, bytes]]:
        """Every row; changes are recorded from now on (a checkpoint is taking the table)."""
        self._logging = True
        return self._entries()

    def _entries(self) -> Iterator[tuple[str, bytes, bytes]]:
        for where, row in self.rows.items():
            yield self.MAP, json_bytes(list(where)), json_bytes(row)

    def restore_entries(self, entries: Iterable[tuple[str, bytes, bytes]]) -> None:
        for _map, entry, value in entries:
            relation, identity = orjson.loads(entry)
            self.rows[(relation, identity)] = orjson.loads(value)
        self._changed.clear()
        self._logging = True

    def __len__(self) -> int:
        return len(self.rows)


class ChangeEvents:
    """Decoded changes -> validated update events for one input (its ``ChangeSpec``) and view schema."""

    def __init__(self, spec: ChangeSpec, schema: Schema, images: ImageTable | None = None) -> None:
        if spec.images and images is None:
            images = ImageTable()
        self.spec = spec
        self.schema = schema
        self.images = images if spec.images else None
        self._codec = EventCodec(schema, compiled=False)
        self._columns = {
            name: tuple((col, COLUMN_TYPES[typ]) for col, typ in rel.columns)
            for name, rel in schema.relations.items()
        }
        key_field = schema.key_field
        self._keep = {
            name: frozenset(rel.column_names) | ({key_field} if key_field else frozenset())
            for name, rel in schema.relations.items()
        }

    def relation(self, named: str | None) -> str:
        """The relation of a change: the configured one, else the record's table."""
        relation = self.spec.relation or named
        if relation is None:
            raise EventError("unknown-relation", "the record names no table and the input no relation")
        return relation

    def row(self, relation: str, image: dict[str, Any], side: str) -> dict[str, Any]:
        """An image projected (where configured) and checked for unreadable columns."""
        keep = self._keep.get(relation)
        if keep is None:
            known = ", ".join(sorted(self._keep))
            raise EventError("unknown-relation", f"unknown relation {relation!r} (known: {known})")
        if self.spec.project:
            image = {c: v for c, v in image.items() if c in keep}
        if UNAVAILABLE not in image.values():  # one pass in C for the common case
            return image
        for column, value in image.items():
            if value == UNAVAILABLE and column in keep:
                raise EventError(
                    "unavailable-value",
                    f"{relation}.{column} of the {side} image is {UNAVAILABLE} (the source did not log it: "
                    "set REPLICA IDENTITY FULL, or read the topic in upsert mode)",
                )
        return image

    def event(self, relation: str, row: dict[str, Any], delta: int) -> UpdateEvent:
        """The validated event: a row whose columns all check takes the short path; anything else the
        codec's, which names the precise reason."""
        columns = self._columns.get(relation)
        key_field = self.schema.key_field
        if columns is not None and len(row) == len(columns) + (key_field is not None):
            out: dict[str, Any] = {}
            try:
                for col, check in columns:
                    v = row[col]
                    if v is None:
                        break
                    out[col] = check(v)
                else:
                    if key_field is None:
                        return UpdateEvent(relation, out, delta, None)
                    kv = row[key_field]
                    if type(kv) is str or type(kv) is int:
                        return UpdateEvent(relation, out, delta, str(kv))
            except (KeyError, TypeError):
                pass
        return self._codec.validate({"relation": relation, "row": row, "delta": delta})

    def events(self, decoded: Decoded) -> list[UpdateEvent] | Skip | EventError:
        """The events of one decoded record, all of them or none (an EventError refuses the record)."""
        if decoded.__class__ is not list:
            if isinstance(decoded, Truncate):
                return self._truncate(decoded)
            return decoded  # type: ignore[return-value]  # a Skip or an EventError
        out: list[UpdateEvent] = []
        undo: list[tuple[str, str, dict[str, Any] | None]] = []
        try:
            for change in decoded:  # type: ignore[union-attr]
                out += self._change(change, undo)
        except EventError as err:
            for relation, identity, row in reversed(undo):  # a record is taken whole or not at all
                assert self.images is not None
                self.images.put(relation, identity, row)
            err.__traceback__ = None
            return err
        return out if out else Skip("unchanged")

    def _change(
        self, change: Change, undo: list[tuple[str, str, dict[str, Any] | None]]
    ) -> list[UpdateEvent]:
        relation = self.relation(change.relation)
        after = self.row(relation, change.after, "after") if change.after is not None else None
        images = self.images
        if images is not None:
            identity = change.identity
            if identity is None:
                raise EventError(
                    "missing-primary-key", "the record has no key and the row no primary-key columns"
                )
            stored = images.get(relation, identity)
            if after is not None and stored == after:
                return []
            out = [] if stored is None else [self.event(relation, stored, -1)]
            if after is not None:
                out.append(self.event(relation, after, 1))
            undo.append((relation, identity, stored))
            images.put(relation, identity, after)
            return out
        before = self.row(relation, change.before, "before") if change.before is not None else None
        if before is None and (after is None or change.update):
            raise EventError(
                "missing-before",
                f"a delete or update of {relation} without its before-image (the source must log full "
                "rows: REPLICA IDENTITY FULL, binlog_row_image=FULL; or read the topic in upsert mode)",
            )
        out = []
        if before is not None:
            out.append(self.event(relation, before, -1))
        if after is not None:
            out.append(self.event(relation, after, 1))
        return out

    def _truncate(self, truncate: Truncate) -> list[UpdateEvent] | Skip | EventError:
        try:
            relation = self.relation(truncate.relation)
        except EventError as err:
            return err
        if self.images is None:
            return EventError(
                "truncate-without-images",
                f"a truncate of {relation} needs the table's rows, kept only in upsert mode (mode: upsert)",
            )
        rows = sorted(self.images.of_relation(relation), key=lambda r: r[0])  # the same order after a restore
        try:
            out = [self.event(relation, row, -1) for _identity, row in rows]
        except EventError as err:
            return err
        for identity, _row in rows:
            self.images.put(relation, identity, None)
        return out if out else Skip("empty-truncate")


def inverse(event: UpdateEvent) -> UpdateEvent:
    """The event that undoes ``event`` (an applied half of a refused update pair)."""
    return UpdateEvent(event.relation, event.row, -event.delta, event.key)
