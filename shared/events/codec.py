"""The event codec: a service's record values decoded into update events, in three tiers that agree.

1. the compiled decoder (``ivmstream.events._fastjson``, built by setup.py) for canonical records;
2. the msgspec path (``ivmstream.events.msgspec_decoder``) for what it declines, or for every record
   where it is not built or IVMSTREAM_PURE_PYTHON=1;
3. the reference decoder (``EventCodec.decode_slow``): the semantics and the precise rejection reasons.

The event model and the schema are in ``ivmstream.events.model``; their names are importable from here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import orjson

from ivmstream.events.model import COLUMN_TYPES, EventError, Relation, Schema, UpdateEvent, encode_event
from ivmstream.events.msgspec_decoder import DECLINED, MsgspecDecoder
from ivmstream.events.reasons import (
    MAX_NESTING,
    MAX_RECORD_BYTES,
    as_bytes,
    json_error_reason,
    out_of_range_integer,
    shown,
    too_deep,
)
from ivmstream.events.reasons import max_record_bytes as record_size_limit

try:  # the compiled decoder (setup.py); without it every record takes the msgspec path
    from ivmstream.events import _fastjson
except ImportError:  # pragma: no cover - a build without a C compiler
    _fastjson = None  # type: ignore[assignment]

__all__ = [
    "CODECS",
    "COLUMN_TYPES",
    "PURE_PYTHON_ENV",
    "EventCodec",
    "EventError",
    "Relation",
    "Schema",
    "UpdateEvent",
    "encode_event",
]

# Set to 1 to decode with the pure-Python (msgspec) path even where the compiled decoder is built:
# for measuring what it buys (bench/runtime.py) and for ruling it out when debugging.
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"

_EVENT_FIELDS = frozenset(("relation", "row", "delta"))


class EventCodec:
    """orjson codec plus validation against a service's schema; built once, used per batch."""

    name = "json"

    def __init__(
        self, schema: Schema, *, compiled: bool | None = None, max_record_bytes: int | None = None
    ) -> None:
        """``compiled``: use the C decoder (default: whenever it is built and IVMSTREAM_PURE_PYTHON
        is not 1); ``True`` insists on it. ``max_record_bytes``: longer records are refused as
        ``oversized`` (a str record is measured in characters); default IVMSTREAM_MAX_RECORD_BYTES,
        else 1 MiB."""
        if max_record_bytes is None:
            max_record_bytes = record_size_limit()
        if max_record_bytes < 1:
            raise ValueError(f"max_record_bytes must be positive, got {max_record_bytes}")
        self.schema = schema
        self.max_record_bytes = max_record_bytes
        self._validators = {
            name: tuple((col, COLUMN_TYPES[typ], typ) for col, typ in rel.columns)
            for name, rel in schema.relations.items()
        }
        self._arity = {name: len(rel.columns) for name, rel in schema.relations.items()}
        self._fast = MsgspecDecoder(schema, max_record_bytes)
        if compiled is None:
            compiled = _fastjson is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1"
        elif compiled and _fastjson is None:
            raise RuntimeError(
                "the compiled decoder ivmstream.events._fastjson is not built (pip install -e .)"
            )
        self._compiled = (
            _compiled_decoder(schema, self._decode_declined, max_record_bytes, self._refuse)
            if compiled
            else None
        )

    @property
    def compiled(self) -> bool:
        """Whether batches are decoded by the compiled decoder (else by the msgspec path)."""
        return self._compiled is not None

    def _decode_declined(self, value: bytes | None) -> UpdateEvent | EventError:
        """A record the compiled decoder left undecided: the msgspec path, then the reference decoder."""
        [item] = self._fast.decode_many((value,))  # the value itself where msgspec cannot decide
        if item.__class__ is UpdateEvent:
            return item
        return self._refuse(value)

    def _refuse(self, value: bytes | str | None) -> UpdateEvent | EventError:
        """The reference decoder's verdict as a value. A refusal is returned, not raised, without the
        traceback a raise attaches (it would keep the decoder's frames alive per dead-lettered record)."""
        try:
            return self.decode_slow(value)
        except EventError as err:
            err.__traceback__ = None
            return err

    def decode(self, value: bytes | str | None) -> UpdateEvent:
        try:
            return self._fast.decode(value)
        except DECLINED:
            return self.decode_slow(value)

    def decode_slow(self, value: bytes | str | None) -> UpdateEvent:
        """Pure-Python decoding and validation: the reference semantics and the precise reasons
        (shared/events/reasons.py; the hostile-input checks come first, in the order of REASONS)."""
        if value is None:
            raise EventError("malformed-json", "empty record value")
        if len(value) > self.max_record_bytes:
            limit = self.max_record_bytes
            raise EventError("oversized", f"record of {len(value)} bytes, over the limit of {limit}")
        raw = as_bytes(value)
        if too_deep(raw):  # before parsing: building thousands of nested lists costs more than the rest
            raise EventError("too-deep", f"JSON nested deeper than {MAX_NESTING} levels")
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise EventError(json_error_reason(raw, str(exc), exc.pos), f"not valid JSON: {exc}") from None
        literal = out_of_range_integer(raw)
        if literal is not None:
            detail = f"integer {literal} is outside the 64-bit range [-2**63, 2**64 - 1]"
            raise EventError("integer-out-of-range", detail)
        return self.validate(obj)

    def validate(self, obj: Any) -> UpdateEvent:
        if type(obj) is not dict:
            raise EventError("not-an-object", f"an event must be a JSON object, got {type(obj).__name__}")
        if obj.keys() != _EVENT_FIELDS:
            missing = _EVENT_FIELDS - obj.keys()
            if missing:
                raise EventError("missing-field", f"event lacks {', '.join(sorted(missing))}")
            extra = sorted(obj.keys() - _EVENT_FIELDS)
            raise EventError("unknown-field", f"event has unknown field(s) {', '.join(extra)}")
        relation = obj["relation"]
        validators = self._validators.get(relation) if type(relation) is str else None
        if validators is None:
            known = ", ".join(sorted(self._validators))
            raise EventError("unknown-relation", f"unknown relation {shown(relation)} (known: {known})")
        delta = obj["delta"]
        if type(delta) is not int:
            raise EventError("bad-delta", f"delta must be an integer, got {shown(delta)}")
        if delta == 0:
            raise EventError("zero-delta", "delta is 0: an update must change a multiplicity")
        row = obj["row"]
        if type(row) is not dict:
            raise EventError("not-an-object", f"row must be a JSON object, got {type(row).__name__}")
        key: str | None = None
        key_field = self.schema.key_field
        expected = self._arity[relation]
        if key_field is not None:
            if key_field not in row:
                raise EventError("missing-key", f"row lacks the partition key field {key_field!r}")
            kv = row[key_field]
            if type(kv) is str:
                key = kv
            elif type(kv) is int:
                key = str(kv)
            else:
                raise EventError("wrong-type", f"key field {key_field!r} must be a string or integer")
            expected += 1
        out: dict[str, Any] = {}
        for col, check, typ in validators:
            if col not in row:
                raise EventError("missing-column", f"{relation}.{col} is missing")
            v = row[col]
            if v is None:
                raise EventError("null-value", f"{relation}.{col} is null")
            try:
                out[col] = check(v)
            except TypeError as exc:
                detail = f"{relation}.{col} must be {exc} ({typ}), got {shown(v)}"
                raise EventError("wrong-type", detail) from None
        if len(row) != expected:
            allowed = set(out) | ({key_field} if key_field else set())
            extra = sorted(set(row) - allowed)
            raise EventError("unexpected-column", f"{relation} has unexpected column(s) {', '.join(extra)}")
        return UpdateEvent(relation, out, delta, key)

    def decode_many(self, values: Iterable[bytes | None]) -> list[UpdateEvent | EventError]:
        """Decode a batch: the compiled fast path for well-formed records, ``decode_slow`` for the rest
        (which names the precise reason, or accepts what the fast path is stricter about)."""
        if self._compiled is not None:
            return self._compiled.decode_many(values)
        out = self._fast.decode_many(values)
        for i, item in enumerate(out):
            if item.__class__ is not UpdateEvent:
                try:
                    out[i] = self.decode_slow(item)
                except EventError as err:
                    out[i] = err
        return out

    def decode_grouped(
        self, values: Iterable[bytes | None]
    ) -> tuple[list[UpdateEvent | EventError], dict[str, list[UpdateEvent]], int]:
        """``decode_many`` and the grouping every consumer does next, in one pass (the worker's hot path).

        Returns ``(decoded, groups, errors)``: ``decoded`` is exactly what ``decode_many`` returns;
        ``groups`` maps each partition key (``""`` without key_field) to its UpdateEvents in input order,
        keys in order of first appearance; ``errors`` counts the EventErrors in ``decoded``."""
        if self._compiled is not None:
            return self._compiled.decode_grouped(values)
        return self._fast.decode_grouped(values, self.decode_slow)

    def column_lists(
        self, values: Sequence[bytes | None], decimal_text: bool = False
    ) -> tuple[list[tuple[int, EventError]], dict[str, dict[str, list[list[Any]]]]] | None:
        """The compiled decoder's columns (``ivmstream.events.columns.decode_columns`` reads them): the
        refused records' ``(index, error)``, and ``groups[key][relation] = [indexes, deltas, column 0,
        ...]`` made without an event per record; None where batches are not decoded in C.
        ``decimal_text``: a decimal written as a plain decimal string stays that string."""
        return self._compiled.decode_columns(values, decimal_text) if self._compiled is not None else None

    def encode(self, event: UpdateEvent) -> bytes:
        return encode_event(event, self.schema.key_field)


CODECS: dict[str, type[EventCodec]] = {EventCodec.name: EventCodec}


def _compiled_decoder(
    schema: Schema,
    fallback: Callable[[Any], Any],
    max_record_bytes: int = MAX_RECORD_BYTES,
    refuse: Callable[[Any], Any] | None = None,
) -> Any:
    """The C decoder for this schema (decimal and exact columns through ``Decimal``, as ``_check_decimal``).
    ``refuse``: the reference decoder, for the records the C decoder finds certainly invalid."""
    assert _fastjson is not None
    codes = {
        "int": _fastjson.T_INT,
        "float": _fastjson.T_FLOAT,
        "number": _fastjson.T_NUMBER,
        "str": _fastjson.T_STR,
        "bool": _fastjson.T_BOOL,
        "exact": _fastjson.T_EXACT,
        "decimal": _fastjson.T_DECIMAL,
    }
    relations = [
        (name, tuple((col, codes[typ]) for col, typ in rel.columns)) for name, rel in schema.relations.items()
    ]
    return _fastjson.Decoder(
        relations,
        schema.key_field,
        UpdateEvent,
        EventError,
        fallback,
        max_size=max_record_bytes,
        refuse=refuse,
        max_depth=MAX_NESTING,
        decimal_type=Decimal,
        invalid_utf8_detail=_invalid_utf8_detail(),
        json_loads=orjson.loads,
        json_messages=_json_messages(),
    )


@functools.cache
def _invalid_utf8_detail() -> str | None:
    """The reference decoder's detail for bytes that are not UTF-8. Its parser checks that the whole text
    is UTF-8 before anything else and refuses any that is not in one message, so the detail for one such
    text is the detail for all (None if that ever stops holding for this one: then the C decoder leaves
    them to the reference decoder)."""
    try:
        EventCodec(Schema.of(), compiled=False, max_record_bytes=MAX_RECORD_BYTES).decode_slow(b'"\xff"')
    except EventError as err:
        return err.detail if err.code == "invalid-utf8" else None
    return None


# Texts the reference decoder's JSON parser refuses in the ways the C decoder's refusal scan recognises,
# with the character position its error names: the text ends too soon, a value starts with N or I (NaN,
# Infinity), a minus sign is followed by one, a number overflows a double.
_PARSER_FAILURES = ((b'{"a":', 5), (b'{"a":NaN}', 5), (b'{"a":-Infinity}', 6), (b'{"a":1e999}', 5))


@functools.cache
def _json_messages() -> tuple[str, ...] | None:
    """The JSON parser's message for each failure of _PARSER_FAILURES, without the position Python's
    JSONDecodeError appends, so that the C decoder can say what the parser says without calling it. None
    (it calls the parser) if a message or position is not of the form expected."""
    messages = []
    for text, pos in _PARSER_FAILURES:
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            where = f": line 1 column {pos + 1} (char {pos})"
            said = str(exc)
            if exc.pos != pos or not said.endswith(where):
                return None
            messages.append(said[: -len(where)])
        else:
            return None
    return tuple(messages)
