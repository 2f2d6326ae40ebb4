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

    def decode(self, key: bytes | None, value: bytes | None) -> Decoded:
        if value is None:
            return Skip("tombstone")
        try:
            return self._decode(key, load_record(value))
        except EventError as err:
            err.__traceback__ = None
            return err

    def _decode(self, key: bytes | None, obj: Any) -> Decoded:
        schema = None
        if type(obj) is dict and "payload" in obj and "schema" in obj and len(obj) == 2:
            schema, obj = obj["schema"], obj["payload"]
            if obj is None:
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
        if schema is not None:
            relation = self.spec.relation or table or ""
            before = self._convert(schema, "before", before, relation) if before is not None else None
            after = self._convert(schema, "after", after, relation) if after is not None else None
        identity = identity_of(key, after or before, self.spec.primary_key) if self.spec.images else None
        return [Change(table, before, after, identity, update)]

    def _convert(self, schema: Any, side: str, row: dict[str, Any], relation: str) -> dict[str, Any]:
        """``row`` with its Connect-encoded columns decoded; a column the schema lacks is a mismatch."""
        where = (orjson.dumps(schema), side, relation)
        cached = self._converters.get(where)
        if cached is None:
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
