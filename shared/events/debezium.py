"""``debezium-json``: Debezium's change envelope, plain or wrapped in ``{"schema", "payload"}`` (told
apart per record, as converters may change with a connector's restart).

``c`` (create) and ``r`` (snapshot read) insert ``after``; ``u`` retracts ``before`` and inserts
``after``; ``d`` retracts ``before``; ``t`` truncates the table; ``m`` (a logical-decoding message)
and tombstones (a null value after a delete, for compaction) carry no row change and are skipped.
Where the record has a schema, Connect's logical types are decoded from it (``ivmstream.events.connect``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ivmstream.events.changes import Change, ChangeSpec, Decoded, Skip, Truncate, identity_of, load_record
from ivmstream.events.codec import EventError
from ivmstream.events.connect import Converter, struct_columns, struct_converters

_INSERTS = frozenset(("c", "r"))
_WRAPPED = b'{"schema":'  # how the JSON converter starts a record with its schema
_PAYLOAD = b',"payload":'


class DebeziumDecoder:
    """One input's Debezium records -> changes. ``types``: relation -> column -> declared type."""

    format = "debezium-json"

    def __init__(self, spec: ChangeSpec, types: Mapping[str, Mapping[str, str]]) -> None:
        self.spec = spec
        self.types = types
        # A connector sends the same schema with every record: its converters are built once per text.
        self._converters: dict[
            tuple[bytes, str, str], tuple[dict[str, Converter], frozenset[str] | None]
        ] = {}
        self._schemas: dict[bytes, Any] = {}  # schema text -> the schema (None: not parsed yet)

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        if value is None:
            return Skip("tombstone")
        try:
            if value[:10] == _WRAPPED:
                split = self._split(value)
                if split is not None:
                    return self._decode(key, split[1], split[0])
            return self._decode(key, load_record(value))
        except EventError as err:
            err.__traceback__ = None
            return err

    def _split(self, value: bytes) -> tuple[bytes, Any] | None:
        """A record as the JSON converter writes it, ``{"schema":S,"payload":P}``: S's text (the key of
        its converters, so the schema is parsed once per text, not per record) and P parsed. None where
        the text is written otherwise: the record is then parsed whole. ``,"payload":`` cannot occur in
        a JSON string (its quotes would be escaped), so where it splits S short, S is not JSON."""
        at = value.find(_PAYLOAD, 10)
        if at < 0 or value[-1:] != b"}":
            return None
        text = value[10:at]
        if text not in self._schemas:
            try:
                schema = orjson.loads(text)
            except orjson.JSONDecodeError:
                return None
            if len(self._schemas) > 64:
                self._schemas.clear()
            self._schemas[text] = schema
        try:
            return text, orjson.loads(memoryview(value)[at + len(_PAYLOAD) : -1])
        except orjson.JSONDecodeError:
            return None

    def _decode(self, key: bytes | None, obj: Any, text: bytes | None = None) -> Decoded:
        """``text``: the record's schema text, ``obj`` its payload (else the record as parsed)."""
        if text is None and type(obj) is dict and "payload" in obj and "schema" in obj and len(obj) == 2:
            text, obj = orjson.dumps(obj["schema"]), obj["payload"]
        if text is not None and obj is None:
            return Skip("tombstone")
        if type(obj) is not dict:
            raise EventError(
                "not-an-object", f"a change record must be a JSON object, got {type(obj).__name__}"
            )
        op = obj.get("op")
        if op == "m":
            return Skip("message")
        source = obj.get("source")
        table = source.get("table") if type(source) is dict else None
        if type(table) is not str:
            table = None
        if op == "t":
            return Truncate(table)
        if op in _INSERTS:
            before, after, update = None, obj.get("after"), False
            if type(after) is not dict:
                raise EventError("schema-mismatch", f"op {op} without an after image")
        elif op == "u":
            before, after, update = obj.get("before"), obj.get("after"), True
            if type(after) is not dict:
                raise EventError("schema-mismatch", "op u without an after image")
        elif op == "d":
            before, after, update = obj.get("before"), None, True
        else:
            raise EventError("unknown-op", f"op {op!r} is none of c, r, u, d, t, m")
        if before is not None and type(before) is not dict:
            raise EventError("schema-mismatch", f"op {op}: before is not an object")
        if text is not None:
            relation = self.spec.relation or table or ""
            before = self._convert(text, "before", before, relation) if before is not None else None
            after = self._convert(text, "after", after, relation) if after is not None else None
        identity = identity_of(key, after or before, self.spec.primary_key) if self.spec.images else None
        return [Change(table, before, after, identity, update)]

    def _convert(self, text: bytes, side: str, row: dict[str, Any], relation: str) -> dict[str, Any]:
        """``row`` with its Connect-encoded columns decoded; a column the schema lacks is a mismatch."""
        where = (text, side, relation)
        cached = self._converters.get(where)
        if cached is None:
            schema = self._schemas.get(text)
            if schema is None:
                schema = self._schemas[text] = orjson.loads(text)
            declared = self.types.get(relation, {})
            cached = (struct_converters(schema, side, declared), struct_columns(schema, side))
            if len(self._converters) > 64:
                self._converters.clear()
            self._converters[where] = cached
        converters, columns = cached
        if columns is not None and not columns.issuperset(row):
            extra = sorted(set(row) - columns)
            raise EventError(
                "schema-mismatch", f"the {side} image has column(s) {', '.join(extra)} its schema lacks"
            )
        if not converters:
            return row
        out = dict(row)
        for column, convert in converters.items():
            value = out.get(column)
            if value is not None:
                out[column] = convert(value)
        return out
