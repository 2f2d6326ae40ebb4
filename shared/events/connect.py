"""Kafka Connect's encodings of column values, decoded from a record's schema.

A schema-wrapped change record (``{"schema": ..., "payload": ...}``) describes each column of its
``before``/``after`` structs; logical types carry values the JSON alone misreads: a decimal is the
base64 of its unscaled two's-complement integer (the scale is in the schema), a date is a count of
days, a timestamp a count of milli-, micro- or nanoseconds. A column is converted to what the
relation declares for it, so a view gets exact decimals and readable times without a converter.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from ivmstream.events.codec import EventError

Converter = Callable[[Any], Any]

_EPOCH = dt.datetime(1970, 1, 1)
_DAY0 = dt.date(1970, 1, 1)

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"

# Logical time types -> (kind, units per second); kind date counts days, time counts since midnight.
_TIMES: dict[str, tuple[str, int]] = {
    "io.debezium.time.Date": ("date", 0),
    "org.apache.kafka.connect.data.Date": ("date", 0),
    "io.debezium.time.Timestamp": ("timestamp", 1_000),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp", 1_000),
    "io.debezium.time.MicroTimestamp": ("timestamp", 1_000_000),
    "io.debezium.time.NanoTimestamp": ("timestamp", 1_000_000_000),
    "io.debezium.time.Time": ("time", 1_000),
    "org.apache.kafka.connect.data.Time": ("time", 1_000),
    "io.debezium.time.MicroTime": ("time", 1_000_000),
    "io.debezium.time.NanoTime": ("time", 1_000_000_000),
}


def unscaled(text: Any, column: str) -> int:
    """The integer a Connect decimal's base64 text holds (big-endian two's complement)."""
    if type(text) is not str:
        raise EventError("schema-mismatch", f"decimal column {column!r} is not base64 text: {text!r}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise EventError(
            "schema-mismatch", f"decimal column {column!r} is not base64: {text[:40]!r}"
        ) from None
    return int.from_bytes(raw, "big", signed=True)


def _decimal(column: str, scale: int) -> Converter:
    def convert(value: Any) -> Decimal:
        return Decimal(unscaled(value, column)).scaleb(-scale)

    return convert


def _variable_decimal(column: str) -> Converter:
    def convert(value: Any) -> Decimal:
        if type(value) is not dict or type(value.get("scale")) is not int:
            raise EventError(
                "decimal-without-scale", f"column {column!r}: a variable-scale decimal lacks its scale"
            )
        return Decimal(unscaled(value.get("value"), column)).scaleb(-value["scale"])

    return convert


def _time(column: str, kind: str, per_second: int, wanted: str) -> Converter | None:
    """A count of units to ISO text, for a column the relation declares as text (else kept as a count)."""
    if wanted != "str":
        return None

    def convert(value: Any) -> str:
        if type(value) is not int:
            raise EventError("schema-mismatch", f"time column {column!r} is not an integer: {value!r}")
        if kind == "date":
            return (_DAY0 + dt.timedelta(days=value)).isoformat()
        seconds, rest = divmod(value, per_second)
        micros = rest * 1_000_000 // per_second
        if kind == "timestamp":
            return (_EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)).isoformat()
        return (dt.datetime.min + dt.timedelta(seconds=seconds, microseconds=micros)).time().isoformat()

    return convert


def _scale(field: Mapping[str, Any], column: str) -> int:
    params = field.get("parameters")
    text = params.get("scale") if isinstance(params, dict) else None
    try:
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise EventError(
            "decimal-without-scale", f"decimal column {column!r} has no scale in its schema"
        ) from None


def _as_declared(convert: Converter, wanted: str | None, column: str) -> Converter:
    """A decimal conversion whose result is shaped for the declared column type."""

    def exact(value: Any) -> Any:
        d = convert(value)
        if wanted in ("float", "number"):
            f = float(d)
            if not math.isfinite(f):
                raise EventError(
                    "wrong-type", f"column {column!r} must be {wanted}, got {d}: beyond a double"
                )
            return f
        if wanted == "int":
            if d != d.to_integral_value():
                raise EventError("wrong-type", f"column {column!r} must be an integer, got {d}")
            return int(d)
        return str(d)  # decimal, exact, str: exact text

    return exact


def struct_converters(schema: Any, side: str, declared: Mapping[str, str]) -> dict[str, Converter]:
    """The converters of the ``side`` (``before``/``after``) struct's columns that need one, from an
    envelope schema (``{"type": "struct", "fields": [{"field": "before", "fields": [...]}, ...]}``).
    ``declared``: column -> declared type (columns it lacks are converted for exactness all the same)."""
    if not isinstance(schema, dict):
        raise EventError("schema-mismatch", "the record's schema is not an object")
    struct = next(
        (f for f in schema.get("fields") or () if isinstance(f, dict) and f.get("field") == side), None
    )
    if struct is None:
        return {}
    out: dict[str, Converter] = {}
    for field in struct.get("fields") or ():
        if not isinstance(field, dict) or type(field.get("field")) is not str:
            raise EventError("schema-mismatch", f"the {side} struct of the schema has a malformed field")
        column, name = field["field"], field.get("name")
        wanted = declared.get(column)
        if name == DECIMAL:
            out[column] = _as_declared(_decimal(column, _scale(field, column)), wanted, column)
        elif name == VARIABLE_DECIMAL:
            out[column] = _as_declared(_variable_decimal(column), wanted, column)
        elif name in _TIMES:
            kind, per_second = _TIMES[name]
            convert = _time(column, kind, per_second, wanted or "")
            if convert is not None:
                out[column] = convert
        elif field.get("type") == "bytes" and wanted is not None:
            raise EventError("schema-mismatch", f"column {column!r} is bytes without a logical type")
    return out


def struct_columns(schema: Any, side: str) -> frozenset[str] | None:
    """The column names the schema gives the ``side`` struct (None: it does not describe it)."""
    if not isinstance(schema, dict):
        return None
    for f in schema.get("fields") or ():
        if isinstance(f, dict) and f.get("field") == side:
            return frozenset(str(c.get("field")) for c in f.get("fields") or () if isinstance(c, dict))
    return None
