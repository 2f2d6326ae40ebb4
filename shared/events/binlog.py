"""``maxwell-json`` and ``canal-json``: MySQL binlog rows as Maxwell and Canal write them.

Both give an update's new row in ``data`` and only the changed columns' old values in ``old``, so the
before-image is ``data`` overlaid with ``old`` (complete only with ``binlog_row_image=FULL``). Canal
batches the rows of one statement in one record and writes every value as text; the text is read as
the relation declares the column.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ivmstream.events.changes import Change, ChangeSpec, Decoded, Skip, identity_of, load_record
from ivmstream.events.codec import EventError

_MAXWELL_SKIPPED = frozenset(("bootstrap-start", "bootstrap-complete"))


def _table(obj: dict[str, Any]) -> str | None:
    table = obj.get("table")
    return table if type(table) is str else None


def _object(value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise EventError("not-an-object", f"{what} must be a JSON object, got {type(value).__name__}")
    return value


class MaxwellDecoder:
    """One input's Maxwell records -> changes."""

    format = "maxwell-json"

    def __init__(self, spec: ChangeSpec, types: Mapping[str, Mapping[str, str]]) -> None:
        self.spec = spec

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        if value is None:
            return Skip("tombstone")
        try:
            obj = _object(load_record(value), "a change record")
            kind = obj.get("type")
            if kind in _MAXWELL_SKIPPED:
                return Skip("bootstrap-marker")
            table = _table(obj)
            if kind in ("insert", "bootstrap-insert"):
                before, after = None, _object(obj.get("data"), "data")
            elif kind == "update":
                after = _object(obj.get("data"), "data")
                old = obj.get("old")
                before = {**after, **_object(old, "old")} if old is not None else None
            elif kind == "delete":
                before, after = _object(obj.get("data"), "data"), None
            else:
                raise EventError("unknown-op", f"type {kind!r} is none of insert, update, delete")
            identity = identity_of(key, after or before, self.spec.primary_key) if self.spec.images else None
            return [Change(table, before, after, identity, kind != "insert" and kind != "bootstrap-insert")]
        except EventError as err:
            err.__traceback__ = None
            return err


def _text_int(text: str) -> int:
    return int(text)


def _text_float(text: str) -> float:
    # float() also reads "nan", "inf" and "1e999": JSON has no such numbers, and no MySQL column holds them
    f = float(text)
    if not math.isfinite(f):
        raise ValueError(text)
    return f


def _text_number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return _text_float(text)


def _text_decimal(text: str) -> str:
    try:
        Decimal(text)
    except InvalidOperation:
        raise ValueError(text) from None
    return text


def _text_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true"):
        return True
    if lowered in ("0", "false"):
        return False
    raise ValueError(text)


_FROM_TEXT: dict[str, Callable[[str], Any]] = {
    "int": _text_int,
    "float": _text_float,
    "number": _text_number,
    "decimal": _text_decimal,
    "exact": _text_decimal,
    "bool": _text_bool,
}


class CanalDecoder:
    """One input's Canal flat-message records -> one change per row (a statement's rows together)."""

    format = "canal-json"

    def __init__(self, spec: ChangeSpec, types: Mapping[str, Mapping[str, str]]) -> None:
        self.spec = spec
        self.types = types

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        if value is None:
            return Skip("tombstone")
        try:
            return self._decode(key, _object(load_record(value), "a change record"))
        except EventError as err:
            err.__traceback__ = None
            return err

    def _decode(self, key: bytes | None, obj: dict[str, Any]) -> Decoded:
        if obj.get("isDdl") is True:
            return Skip("ddl")
        kind = obj.get("type")
        if kind not in ("INSERT", "UPDATE", "DELETE"):
            raise EventError("unknown-op", f"type {kind!r} is none of INSERT, UPDATE, DELETE")
        rows = obj.get("data")
        if type(rows) is not list:
            raise EventError("not-an-object", "data must be a list of rows")
        old = obj.get("old")
        if kind == "UPDATE" and old is not None and (type(old) is not list or len(old) != len(rows)):
            raise EventError("schema-mismatch", "old must be a list of as many rows as data")
        table = _table(obj)
        relation = self.spec.relation or table or ""
        typed = self._typed(relation)
        pk = self.spec.primary_key
        names = obj.get("pkNames")
        if pk is None and type(names) is list and names and all(type(n) is str for n in names):
            pk = tuple(names)
        out = []
        for i, raw in enumerate(rows):
            data = typed(_object(raw, "a row"))
            if kind == "INSERT":
                before, after = None, data
            elif kind == "UPDATE":
                before = {**data, **typed(_object(old[i], "an old row"))} if old is not None else None
                after = data
            else:
                before, after = data, None
            identity = identity_of(None, data, pk) if self.spec.images else None
            if self.spec.images and identity is None:
                identity = identity_of(key, data, pk)
            out.append(Change(table, before, after, identity, kind != "INSERT"))
        return out

    def _typed(self, relation: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Reads a row's text values as the relation declares each column (others stay text)."""
        declared = self.types.get(relation, {})
        readers = {c: _FROM_TEXT[t] for c, t in declared.items() if t in _FROM_TEXT}

        def typed(row: dict[str, Any]) -> dict[str, Any]:
            out = {}
            for column, value in row.items():
                read = readers.get(column)
                if read is not None and type(value) is str:
                    try:
                        value = read(value)
                    except ValueError:
                        detail = f"{relation}.{column} must be {declared[column]}, got {value[:40]!r}"
                        raise EventError("wrong-type", detail) from None
                out[column] = value
            return out

        return typed
