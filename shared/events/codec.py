"""Update events: the one record format every service consumes.

An update is ``{"relation": name, "row": {column: value, ...}, "delta": k}`` with ``k`` a nonzero
integer multiplicity change. Validation is strict and precise because a silently coerced or dropped
field corrupts an incremental view forever: every rejection names its reason (``EventError.code``
is a stable, low-cardinality label for metrics and the dead-letter topic; ``detail`` is for humans).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Union

import msgspec
import orjson

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

try:  # the compiled decoder (setup.py); without it every record takes the msgspec path below
    from ivmstream.events import _fastjson
except ImportError:  # pragma: no cover - a build without a C compiler
    _fastjson = None  # type: ignore[assignment]

# Set to 1 to decode with the pure-Python (msgspec) path even where the compiled decoder is built:
# for measuring what it buys (bench/runtime.py) and for ruling it out when debugging.
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"


class EventError(ValueError):
    """An update that cannot be applied, with a stable reason code and a precise explanation.

    The compiled decoder makes its instances without calling ``__init__`` (the same ``args``, ``code``
    and ``detail``, checked by tests/unit/hostile/test_cheap_refusal.py): keep the two in step. ``code`` and
    ``detail`` are slots, so that a flood of refused records allocates no attribute dict per record."""

    __slots__ = ("code", "detail")

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class UpdateEvent(msgspec.Struct, gc=False):
    """A decoded, validated update. ``key`` is the partition key value (``None`` without key_field).

    A msgspec struct: built once per record on the hot path, and its constructor runs in C. Like the
    dataclass it replaces it is mutable, unhashable and compares field by field (same class only), with
    the same ``repr``. ``gc=False``: events hold plain rows, never themselves, so they can take no part in
    a reference cycle and need no tracking by the cycle collector. Engines must treat events as read-only.
    """

    relation: str
    row: dict[str, Any]
    delta: int
    key: str | None = None

    def to_json(self, key_field: str | None = None) -> dict[str, Any]:
        row = dict(self.row)
        if key_field is not None and self.key is not None:
            row[key_field] = self.key
        return {"relation": self.relation, "row": row, "delta": self.delta}


def _encode_default(v: Any) -> Any:
    # orjson has no Decimal support; a decimal string is exact and is what the decimal type accepts.
    if type(v) is Decimal:
        return str(v)
    raise TypeError(f"Type is not JSON serializable: {type(v).__name__}")


def encode_event(event: UpdateEvent, key_field: str | None = None) -> bytes:
    return orjson.dumps(event.to_json(key_field), default=_encode_default)


# --- column types -------------------------------------------------------------------------------
# Each checker returns the coerced value or raises TypeError with what was expected.


def _check_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise TypeError("an integer")


def _check_float(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    raise TypeError("a number")


def _check_number(v: Any) -> int | float:
    t = type(v)
    if t is int or t is float:
        return v
    raise TypeError("a number")


def _check_str(v: Any) -> str:
    if type(v) is str:
        return v
    raise TypeError("a string")


def _check_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise TypeError("a boolean")


def _check_decimal(v: Any) -> Decimal:
    """Exact decimal: integers, decimal strings, and floats by their shortest repr (what was written)."""
    t = type(v)
    if t is int:
        return Decimal(v)
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise TypeError("a finite decimal")
        return Decimal(repr(v))
    if t is str:
        try:
            d = Decimal(v)
        except InvalidOperation:
            raise TypeError("a decimal number or decimal string") from None
        if not d.is_finite():
            raise TypeError("a finite decimal")
        return d
    raise TypeError("a decimal number or decimal string")


def _check_exact(v: Any) -> int | Decimal:
    """Exact number: integers stay Python ints (the fast path), anything else is an exact Decimal."""
    if type(v) is int:
        return v
    return _check_decimal(v)


COLUMN_TYPES: dict[str, Callable[[Any], Any]] = {
    "int": _check_int,
    "float": _check_float,
    "number": _check_number,
    "str": _check_str,
    "bool": _check_bool,
    "decimal": _check_decimal,
    "exact": _check_exact,
}


@dataclass(frozen=True)
class Relation:
    """A relation a service accepts: its name and ordered, typed columns."""

    name: str
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        for col, typ in self.columns:
            if typ not in COLUMN_TYPES:
                raise ValueError(
                    f"relation {self.name!r}: column {col!r} has unknown type {typ!r} "
                    f"(known: {', '.join(COLUMN_TYPES)})"
                )
        names = [c for c, _ in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"relation {self.name!r}: duplicate column names")

    @classmethod
    def of(cls, name: str, **columns: str) -> Relation:
        return cls(name, tuple(columns.items()))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)


@dataclass(frozen=True)
class Schema:
    """The relations of one service instance plus the optional partition-key column."""

    relations: Mapping[str, Relation]
    key_field: str | None = None

    @classmethod
    def of(cls, *relations: Relation, key_field: str | None = None) -> Schema:
        return cls({r.name: r for r in relations}, key_field)

    def __post_init__(self) -> None:
        if self.key_field is not None:
            for rel in self.relations.values():
                if self.key_field in rel.column_names:
                    raise ValueError(
                        f"key_field {self.key_field!r} collides with a column of relation {rel.name!r}"
                    )


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
        self._fast = _FastDecoder(schema, max_record_bytes)
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
        except _DECLINED:
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
        self, values: Sequence[bytes | None]
    ) -> tuple[list[tuple[int, EventError]], dict[str, dict[str, list[list[Any]]]]] | None:
        """The compiled decoder's columns (``ivmstream.events.columns.decode_columns`` reads them): the
        refused records' ``(index, error)``, and ``groups[key][relation] = [indexes, deltas, column 0,
        ...]`` made without an event per record; None where batches are not decoded in C."""
        return self._compiled.decode_columns(values) if self._compiled is not None else None

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


class _NeedsSlowPath(Exception):
    """The fast path cannot decide; the reference decoder will (and report why, if it rejects)."""


# What the msgspec path leaves to the reference decoder: its own refusals, type mismatches, text that
# is not UTF-8 (msgspec raises UnicodeDecodeError; for a str with a lone surrogate, UnicodeEncodeError)
# and nesting deeper than Python's recursion limit (RecursionError).
_DECLINED = (msgspec.DecodeError, TypeError, UnicodeError, RecursionError, _NeedsSlowPath)

# orjson (the reference parser) reads integers outside [-2**63, 2**64 - 1] as floats, and msgspec reads
# any integer as an int: integers beyond int64 (the widest bounds msgspec checks) go to the reference.
_JSON_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

# Column types as msgspec decodes them. Only exact, strict types are decoded natively; decimal and
# number columns arrive as their JSON type and go through the same checker as the slow path. A float
# column takes integers as int64 and converts them, so that a longer literal is declined (the reference
# refuses it) rather than read as a float.
_FAST_TYPES: dict[str, Any] = {
    "int": _JSON_INT,
    "float": _JSON_INT | float,
    "number": _JSON_INT | float,
    "str": str,
    "bool": bool,
    "decimal": _JSON_INT | float | str,
    "exact": _JSON_INT | float | str,
}


class _FastDecoder:
    """One msgspec decoder for the schema: a tagged union of per-relation event structs.

    msgspec parses and type-checks in C, about half the cost of ``orjson.loads`` alone; whatever it
    cannot accept is handed to the pure-Python path, which owns the error messages.

    The per-record loops that turn decoded structs into ``UpdateEvent``s are generated for the schema
    (as ``dataclasses`` generates ``__init__``): each relation's row dict is one dict display over the
    struct's attributes, with no per-record lookups of field names, relations or checkers. Struct
    attributes are named ``c0, c1, ...`` (``k`` for the key field) and renamed to the column names, so
    any column name works; names reach the generated source only as ``str`` literals."""

    def __init__(self, schema: Schema, max_record_bytes: int = MAX_RECORD_BYTES) -> None:
        self.key_field = key_field = schema.key_field
        self.max_record_bytes = max_record_bytes
        structs = []
        self._relations: list[tuple[Any, str, tuple[tuple[str, Callable[[Any], Any] | None], ...]]] = []
        for i, (name, rel) in enumerate(schema.relations.items()):
            fields: list[tuple[str, Any]] = [
                (f"c{j}", _FAST_TYPES[typ]) for j, (_, typ) in enumerate(rel.columns)
            ]
            rename = {f"c{j}": col for j, (col, _) in enumerate(rel.columns)}
            if key_field is not None:
                fields.append(("k", str | _JSON_INT))
                rename["k"] = key_field
            row_t = msgspec.defstruct(f"Row{i}", fields, rename=rename, forbid_unknown_fields=True, gc=False)
            event_t = msgspec.defstruct(
                f"Event{i}",
                [("row", row_t), ("delta", _JSON_INT)],
                tag_field="relation",
                tag=name,
                forbid_unknown_fields=True,
                gc=False,  # a temporary holding scalars only
            )
            structs.append(event_t)
            # Decimal, exact and float columns arrive as their JSON type and go through the slow path's
            # checker.
            checks = tuple(
                (col, COLUMN_TYPES[typ] if typ in ("decimal", "exact", "float") else None)
                for col, typ in rel.columns
            )
            self._relations.append((event_t, name, checks))
        # msgspec does not insist on the tag of a lone tagged struct: a schema of one relation gets a
        # second member no record can decode into, so that the union makes "relation" required.
        unused = "\x00unused"
        while unused in schema.relations:
            unused += "\x00"
        fields_unused = [("row", Any, None), ("delta", Any, 0)]
        structs.append(msgspec.defstruct("Unused", fields_unused, tag_field="relation", tag=unused))
        union = Union[tuple(structs)]  # noqa: UP007 - runtime union
        self._decoder = msgspec.json.Decoder(union)
        self.decode_many = self._compile(grouped=False)
        self.decode_grouped = self._compile(grouped=True)

    def decode(self, value: bytes | str | None) -> UpdateEvent:
        if value is None:
            raise _NeedsSlowPath
        [item] = self.decode_many([value])
        if item.__class__ is not UpdateEvent:
            raise _NeedsSlowPath
        return item

    def _compile(self, grouped: bool) -> Callable[..., Any]:
        """Generate one tight loop over a batch of record values, with locals only.

        ``grouped=False``: ``decode_many(values)`` gives, per value, its UpdateEvent where the fast path
        decides and the value itself where it cannot.

        ``grouped=True``: ``decode_grouped(values, slow)`` decodes every value, calling ``slow`` (the
        reference decoder) where the fast path cannot decide, and returns ``(decoded, groups, errors)``:
        per value its UpdateEvent or EventError, the UpdateEvents per partition key (``""`` without a
        key field) in their order, and the number of EventErrors."""
        keyed = self.key_field is not None
        namespace: dict[str, Any] = {
            "UpdateEvent": UpdateEvent,
            "EventError": EventError,
            "_NeedsSlowPath": _NeedsSlowPath,
            "_DECLINE": _DECLINED,
            "_decode": self._decoder.decode,
            "_limit": self.max_record_bytes,
        }
        src = ["def decode_grouped(values, slow):" if grouped else "def decode_many(values):"]
        src += ["    decode = _decode", "    limit = _limit", "    decoded = []"]
        if grouped:
            src += ["    errors = 0"]
            if keyed:
                src += ["    groups = {}"]
        src += [
            "    for v in values:",
            "        try:",
            "            if len(v) > limit:",  # None: a TypeError, declined like the oversized
            "                raise _NeedsSlowPath",
            "            ev = decode(v)",
            "            d = ev.delta",  # msgspec already refused bools and floats
            "            if not d:",
            "                raise _NeedsSlowPath",
        ]
        src += ["            cls = type(ev)"]
        for i, (event_t, name, checks) in enumerate(self._relations):
            indent = "                "
            namespace[f"Event{i}"] = event_t
            src += [f"            {'if' if i == 0 else 'elif'} cls is Event{i}:"]
            items = []
            for j, (col, check) in enumerate(checks):
                if check is None:
                    items.append(f"{_literal(col)}: r.c{j}")
                else:
                    namespace[f"check{i}_{j}"] = check
                    items.append(f"{_literal(col)}: check{i}_{j}(r.c{j})")  # TypeError: the slow path decides
            src += [f"{indent}r = ev.row"]
            if keyed:
                src += [f"{indent}k = r.k", f"{indent}if type(k) is not str:", f"{indent}    k = str(k)"]
            src += [
                f"{indent}e = UpdateEvent({_literal(name)}, {{{', '.join(items)}}}, d, "
                f"{'k' if keyed else 'None'})"
            ]
        if self._relations:
            src += ["            else:", "                raise _NeedsSlowPath  # the union's unused member"]
        else:
            src += ["            raise _NeedsSlowPath"]
        src += ["        except _DECLINE:"]
        if grouped:
            src += [
                "            try:",
                "                e = slow(v)",
                "            except EventError as err:",
                "                decoded.append(err)",
                "                errors += 1",
                "                continue",
            ]
            if keyed:
                src += ["            k = e.key"]
        else:
            src += ["            decoded.append(v)", "            continue"]
        src += ["        decoded.append(e)"]
        if grouped and keyed:
            src += [
                "        group = groups.get(k)",
                "        if group is None:",
                "            groups[k] = [e]",
                "        else:",
                "            group.append(e)",
                "    return decoded, groups, errors",
            ]
        elif grouped:  # one group, the valid events in order
            src += [
                "    events = decoded.copy() if not errors else [",
                "        e for e in decoded if e.__class__ is UpdateEvent",
                "    ]",
                "    return decoded, ({'': events} if events else {}), errors",
            ]
        else:
            src += ["    return decoded"]
        exec(
            compile(
                "\n".join(src) + "\n", f"<ivmstream fast decoder {'grouped' if grouped else 'many'}>", "exec"
            ),
            namespace,
        )
        return namespace["decode_grouped" if grouped else "decode_many"]


def _literal(name: Any) -> str:
    """The Python literal of a relation or column name, for generated source (the value, as a plain str)."""
    if not isinstance(name, str):
        raise TypeError(f"relation and column names must be strings, got {name!r}")
    return str.__repr__(name)
