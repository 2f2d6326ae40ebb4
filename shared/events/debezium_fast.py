"""The common Debezium record decoded straight into events, with converters compiled once per schema.

Most records of a healthy topic are alike: an insert, update or delete whose rows hold exactly the
relation's columns, well typed, plain or wrapped with the same schema text as the record before. For
those, a row goes from the payload to a validated event in one loop over per-column checks built once
(a Connect decimal straight from its base64 to a ``Decimal``, a timestamp to its text), and the schema
is matched by a prefix comparison instead of a search. Anything else (a refusal, a skip, a truncate,
an unusual column) is not decided here: ``events`` answers None and the general decoder
(``ivmstream.events.debezium`` then ``ivmstream.events.changes``) decides and names the reason, so the
two paths agree on every record by construction.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from ivmstream.events.changes import UNAVAILABLE, ChangeSpec
from ivmstream.events.codec import COLUMN_TYPES, EventError, Schema, UpdateEvent
from ivmstream.events.connect import DECIMAL, struct_columns, struct_converters

_WRAPPED = b'{"schema":'
_PAYLOAD = b',"payload":'
_a2b = binascii.a2b_base64
_from_bytes = int.from_bytes

Check = Callable[[Any], Any]
RowEvent = Callable[[Any, int], UpdateEvent]


# How a column is checked: inline for the commonest types, else by calling its function.
_CALL, _INT, _STR = 0, 1, 2
_KINDS = {"int": _INT, "str": _STR}


class _Miss(Exception):
    """Not the common case: the general decoder takes the record."""


def _text(v: Any) -> str:
    if type(v) is str and v != UNAVAILABLE:
        return v
    raise _Miss


def _connect_decimal(scale: int, wanted: str) -> Check | None:
    """A Connect decimal (base64 of the unscaled integer) as the declared column holds it."""
    if wanted not in ("decimal", "exact"):
        return None

    def convert(v: Any) -> Decimal:
        if type(v) is not str:
            raise _Miss
        return Decimal(_from_bytes(_a2b(v, strict_mode=True), "big", signed=True)).scaleb(-scale)

    return convert


def _then(convert: Check, check: Check) -> Check:
    return lambda v: check(convert(v))


def row_event(
    relation: str,
    schema: Schema,
    converters: dict[str, Check] | None = None,
    finals: dict[str, Check] | None = None,
) -> RowEvent | None:
    """A function from a row of ``relation`` (plus the key field) to its event, raising ``_Miss`` where
    the row is not exactly that; ``converters`` decode columns before their type's check (a wrapped
    record's encodings), ``finals`` instead of it (they yield the column's value)."""
    rel = schema.relations.get(relation)
    if rel is None:
        return None
    key_field = schema.key_field
    columns: list[tuple[str, int, Check]] = []
    for col, typ in rel.columns:
        check = COLUMN_TYPES[typ]
        convert = (converters or {}).get(col)
        final = (finals or {}).get(col)
        if final is not None:
            columns.append((col, _CALL, final))
        elif convert is not None:
            columns.append((col, _CALL, _then(convert, _text if typ == "str" else check)))
        else:
            columns.append((col, _KINDS.get(typ, _CALL), check))
    width = len(columns) + (key_field is not None)
    cols = tuple(columns)

    def event(row: Any, delta: int) -> UpdateEvent:
        if type(row) is not dict or len(row) != width:
            raise _Miss
        out = {}
        for col, kind, check in cols:
            v = row[col]
            if kind == _INT:
                if type(v) is not int:
                    raise _Miss
            elif kind == _STR:
                if type(v) is not str or v == UNAVAILABLE:
                    raise _Miss
            elif v is None:
                raise _Miss
            else:
                v = check(v)
            out[col] = v
        if key_field is None:
            return UpdateEvent(relation, out, delta, None)
        kv = row[key_field]
        if (type(kv) is str and kv != UNAVAILABLE) or type(kv) is int:
            return UpdateEvent(relation, out, delta, str(kv))
        raise _Miss

    return event


def wrapped_row_event(relation: str, schema: Schema, envelope: Any, side: str) -> RowEvent | None:
    """``row_event`` for the ``side`` struct of a wrapped record's schema; None where its columns are
    not exactly the relation's (the general decoder names the mismatch)."""
    rel = schema.relations.get(relation)
    if rel is None:
        return None
    wanted = dict(rel.columns)
    if schema.key_field is not None:
        wanted.setdefault(schema.key_field, "")
    columns = struct_columns(envelope, side)
    if columns is None or not columns.issuperset(wanted):
        return None
    try:
        converters: dict[str, Check] = dict(struct_converters(envelope, side, wanted))
    except EventError:
        return None
    finals: dict[str, Check] = {}
    struct = next(f for f in envelope["fields"] if isinstance(f, dict) and f.get("field") == side)
    for field in struct["fields"]:
        column = field.get("field")
        if field.get("name") == DECIMAL and column in wanted:
            params = field.get("parameters")
            try:
                scale = int(params["scale"])
            except (KeyError, TypeError, ValueError):
                return None
            fast = _connect_decimal(scale, wanted[column])
            if fast is not None:
                finals[column] = fast
    return row_event(relation, schema, converters, finals)


class FastDebezium:
    """One input's common Debezium records -> events (None: the general decoder's record). For inputs
    that keep no images and do not project: those need the general path's bookkeeping."""

    def __init__(self, spec: ChangeSpec, schema: Schema) -> None:
        self.relation = spec.relation
        self.schema = schema
        self._plain: dict[str, RowEvent | None] = {}
        self._wrapped: dict[tuple[bytes, str], tuple[RowEvent, RowEvent] | None] = {}
        self._schemas: dict[bytes, Any] = {}
        self._text = b""  # the last record's schema text
        self._start = 0  # where its payload starts

    def events(self, key: bytes | None, value: bytes | None) -> list[UpdateEvent] | None:
        if value is None:
            return None
        try:
            if value[:10] == _WRAPPED:
                return self._wrapped_events(value)
            return self._events(orjson.loads(value), None)
        except (_Miss, KeyError, TypeError, ValueError, ArithmeticError, binascii.Error):
            return None

    def _wrapped_events(self, value: bytes) -> list[UpdateEvent] | None:
        text = self._text
        if not (text and value.startswith(text, 10) and value.startswith(_PAYLOAD, self._start - 11)):
            at = value.find(_PAYLOAD, 10)
            if at < 0:
                return None
            text = value[10:at]
            if text not in self._schemas:
                if len(self._schemas) > 64:
                    self._schemas.clear()
                    self._wrapped.clear()
                self._schemas[text] = orjson.loads(text)
            self._text, self._start = text, at + 11
        if value[-1:] != b"}":
            return None
        return self._events(orjson.loads(memoryview(value)[self._start : -1]), text)

    def _events(self, obj: Any, text: bytes | None) -> list[UpdateEvent] | None:
        op = obj["op"]
        relation = self.relation
        if relation is None:
            relation = obj["source"]["table"]
            if type(relation) is not str:
                return None
        rows = self._rows(relation, text)
        if rows is None:
            return None
        before, after = rows
        if op == "c" or op == "r":
            return [after(obj["after"], 1)]
        if op == "u":
            return [before(obj["before"], -1), after(obj["after"], 1)]
        if op == "d":
            return [before(obj["before"], -1)]
        return None

    def _rows(self, relation: str, text: bytes | None) -> tuple[RowEvent, RowEvent] | None:
        if text is None:
            if relation not in self._plain:
                self._plain[relation] = row_event(relation, self.schema)
            plain = self._plain[relation]
            return None if plain is None else (plain, plain)
        where = (text, relation)
        if where not in self._wrapped:
            envelope = self._schemas[text]
            before = wrapped_row_event(relation, self.schema, envelope, "before")
            after = wrapped_row_event(relation, self.schema, envelope, "after")
            self._wrapped[where] = None if before is None or after is None else (before, after)
        return self._wrapped[where]
