"""The common Debezium record decoded straight into events, with converters compiled once per schema.

Most records of a healthy topic are alike: an insert, update or delete whose rows hold exactly the
relation's columns, well typed, plain or wrapped with the same schema text as the record before. For
those, a row goes from the payload to a validated event in one loop over per-column checks built once
(a Connect decimal straight from its base64 to a ``Decimal``, a timestamp to its text), and the schema
is matched by a prefix comparison instead of a search. Anything else (a refusal, a skip, a truncate,
an unusual column) is not decided here: ``events`` answers None and the general decoder
(``ivmstream.events.debezium`` then ``ivmstream.events.changes``) decides and names the reason, so the
two paths agree on every record by construction.

Where the compiled decoder is built (``ivmstream.events._fastjson``, unless IVMSTREAM_PURE_PYTHON=1),
the common record is first decoded in C, straight from its bytes (a wrapped record's payload in place:
the schema text is never parsed again, and a Connect decimal goes from base64 to ``Decimal`` there):
the same checks, but it declines anything it cannot decide cheaply, which then takes the Python
converters below. Tests check the three tiers against each other record by record.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import orjson

from ivmstream.events.changes import UNAVAILABLE, ChangeSpec
from ivmstream.events.codec import COLUMN_TYPES, PURE_PYTHON_ENV, EventError, Schema, UpdateEvent
from ivmstream.events.connect import DECIMAL, struct_columns, struct_converters

try:  # the compiled decoder (setup.py); without it the Python converters below decode every record
    from ivmstream.events import _fastjson
except ImportError:  # pragma: no cover - a build without a C compiler
    _fastjson = None  # type: ignore[assignment]

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


def compiled_available() -> bool:
    """Whether change records are decoded in C first (built, and IVMSTREAM_PURE_PYTHON is not 1)."""
    return _fastjson is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1"


def _type_codes() -> dict[str, int]:
    assert _fastjson is not None
    f = _fastjson
    return {
        "int": f.T_INT,
        "float": f.T_FLOAT,
        "number": f.T_NUMBER,
        "str": f.T_STR,
        "bool": f.T_BOOL,
        "exact": f.T_EXACT,
        "decimal": f.T_DECIMAL,
    }


def _declined(_value: Any) -> Any:  # pragma: no cover - decode_debezium never calls the fallback
    raise AssertionError("the change decoder has no fallback")


def compiled_decoder(
    schema: Schema, columns: Mapping[str, tuple[tuple[Any, ...], ...] | None] | None = None
) -> Any:
    """The C decoder of change records of ``schema``'s relations (``columns``: as ``compiled_columns``
    gives them for a wrapped record's schema; default: as a plain record holds them). None where no
    relation can be decoded in C."""
    assert _fastjson is not None
    codes = _type_codes()
    relations = []
    for name, rel in schema.relations.items():
        spec = tuple((col, codes[typ]) for col, typ in rel.columns) if columns is None else columns.get(name)
        relations.append((name, spec if spec is not None else (("", _fastjson.T_DECLINE),)))
    if columns is not None and not any(columns.values()):
        return None
    return _fastjson.Decoder(
        relations, schema.key_field, UpdateEvent, EventError, _declined, decimal_type=Decimal
    )


def compiled_columns(schema: Schema, envelope: Any) -> dict[str, tuple[tuple[Any, ...], ...] | None]:
    """Per relation, its columns as the compiled decoder reads them from a wrapped record with this
    envelope schema (a Connect decimal as ``(column, T_CONNECT_DECIMAL, scale)``); None where the
    schema's structs need what only the Python converters do (another logical type, a key field or a
    non-decimal column converted, a struct lacking a column, before and after described apart)."""
    assert _fastjson is not None
    codes = _type_codes()
    out: dict[str, tuple[tuple[Any, ...], ...] | None] = {}
    for name, rel in schema.relations.items():
        wanted = dict(rel.columns)
        if schema.key_field is not None:
            wanted.setdefault(schema.key_field, "")
        sides: list[tuple[tuple[Any, ...], ...] | None] = []
        for side in ("before", "after"):
            columns = struct_columns(envelope, side)
            if columns is None or not columns.issuperset(wanted):
                sides.append(None)
                continue
            try:
                converted = set(struct_converters(envelope, side, wanted)) & set(wanted)
            except EventError:
                sides.append(None)
                continue
            struct = next(f for f in envelope["fields"] if isinstance(f, dict) and f.get("field") == side)
            spec: list[tuple[Any, ...]] = []
            for col, typ in rel.columns:
                if col not in converted:
                    spec.append((col, codes[typ]))
                    continue
                field = next(f for f in struct["fields"] if f.get("field") == col)
                scale = (field.get("parameters") or {}).get("scale")
                digits = type(scale) is str and scale.isascii() and scale.isdigit()
                if field.get("name") != DECIMAL or typ != "decimal" or not digits:
                    spec = []
                    break
                spec.append((col, _fastjson.T_CONNECT_DECIMAL, int(str(scale))))
            ok = bool(spec) and (schema.key_field is None or schema.key_field not in converted)
            sides.append(tuple(spec) if ok else None)
        out[name] = sides[0] if sides[0] is not None and sides[0] == sides[1] else None
    return out


class FastDebezium:
    """One input's common Debezium records -> events (None: the general decoder's record). For inputs
    that keep no images and do not project: those need the general path's bookkeeping. ``compiled``:
    decode in C first (default: where it is built and IVMSTREAM_PURE_PYTHON is not 1)."""

    def __init__(self, spec: ChangeSpec, schema: Schema, compiled: bool | None = None) -> None:
        self.relation = spec.relation
        self.schema = schema
        self._plain: dict[str, RowEvent | None] = {}
        self._wrapped: dict[tuple[bytes, str], tuple[RowEvent, RowEvent] | None] = {}
        self._schemas: dict[bytes, Any] = {}
        self._text = b""  # the last record's schema text
        self._start = 0  # where its payload starts
        self.compiled = compiled_available() if compiled is None else compiled
        self._c_plain = compiled_decoder(schema) if self.compiled else None
        self._c_wrapped: dict[bytes, Any] = {}  # per schema text: its compiled decoder, or None

    def events(self, key: bytes | None, value: bytes | None) -> list[UpdateEvent] | None:
        if value is None:
            return None
        try:
            if value[:10] == _WRAPPED:
                return self._wrapped_events(value)
            if self._c_plain is not None:
                out = self._c_plain.decode_debezium(value, 0, len(value), self.relation)
                if out is not None:
                    return out  # type: ignore[no-any-return]
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
                    self._c_wrapped.clear()
                self._schemas[text] = envelope = orjson.loads(text)
                if self.compiled:
                    self._c_wrapped[text] = self._compiled_wrapped(envelope)
            self._text, self._start = text, at + 11
        if value[-1:] != b"}":
            return None
        decoder = self._c_wrapped.get(text)
        if decoder is not None:
            out = decoder.decode_debezium(value, self._start, len(value) - 1, self.relation)
            if out is not None:
                return out  # type: ignore[no-any-return]
        return self._events(orjson.loads(memoryview(value)[self._start : -1]), text)

    def _compiled_wrapped(self, envelope: Any) -> Any:
        """The C decoder for records wrapped with this schema (None: their relations need Python)."""
        try:
            return compiled_decoder(self.schema, compiled_columns(self.schema, envelope))
        except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
            return None

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
