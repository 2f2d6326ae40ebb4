"""The Debezium fast path (ivmstream.events.debezium_fast) decides only the records it decodes exactly as
the general path does: over a corpus of good, odd and bad records, plain and wrapped, keyed and keyless,
a codec with the fast path gives what the general path alone gives, record by record."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from helpers_cdc import RELATIONS, workload

from ivmstream.events import EventError, Relation, Schema
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import UNAVAILABLE, ChangeSpec

DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _b64(cents: int) -> str:
    return base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode()


def _field(name: str, kind: str, logical: str | None = None, **params: str) -> dict[str, Any]:
    out: dict[str, Any] = {"field": name, "type": kind}
    if logical:
        out["name"] = logical
    if params:
        out["parameters"] = params
    return out


FIELDS = [
    _field("id", "int64"),
    _field("amount", "bytes", DECIMAL, scale="2"),
    _field("day", "int32", "io.debezium.time.Date"),
    _field("note", "string"),
    _field("tenant", "string"),
]


def _wrap(payload: dict[str, Any], fields: list[dict[str, Any]] = FIELDS) -> bytes:
    sides = [{"field": s, "type": "struct", "optional": True, "fields": fields} for s in ("before", "after")]
    return orjson.dumps({"schema": {"type": "struct", "fields": sides}, "payload": payload})


def _payload(op: str, before: Any = None, after: Any = None, table: str = "orders") -> dict[str, Any]:
    return {"before": before, "after": after, "op": op, "source": {"table": table}, "ts_ms": 1}


def _corpus() -> list[tuple[bytes | None, bytes | None]]:
    plain = {"id": 1, "amount": "12.50", "day": "2024-01-01", "note": "x", "tenant": "t1"}
    connect = {"id": 1, "amount": _b64(1250), "day": 19723, "note": "x", "tenant": "t1"}
    odd_rows = [
        {**plain, "note": UNAVAILABLE},
        {**plain, "tenant": UNAVAILABLE},
        {**plain, "extra": 1},
        {k: v for k, v in plain.items() if k != "note"},
        {**plain, "note": None},
        {**plain, "id": True},
        {**plain, "id": 1.0},
        {**plain, "amount": 12.5},
        {**plain, "amount": "x"},
        {**plain, "tenant": 7},
        {**plain, "tenant": 7.5},
    ]
    odd_connect = [
        {**connect, "amount": "not base64!"},
        {**connect, "amount": 12},
        {**connect, "day": "2024-01-01"},
        {**connect, "note": UNAVAILABLE},
        {**connect, "extra": 1},
        {**connect, "amount": None},
    ]
    out: list[tuple[bytes | None, bytes | None]] = [(b'{"id":1}', None)]
    for row in [plain, *odd_rows]:
        for op, before, after in (("c", None, row), ("r", None, row), ("u", plain, row), ("u", row, plain)):
            out.append((None, orjson.dumps(_payload(op, before, after))))
        out.append((None, orjson.dumps(_payload("d", row, None))))
    for row in [connect, *odd_connect]:
        out.append((None, _wrap(_payload("c", None, row))))
        out.append((None, _wrap(_payload("u", connect, row))))
        out.append((None, _wrap(_payload("d", row))))
    out += [
        (None, orjson.dumps(_payload("u", None, plain))),
        (None, orjson.dumps(_payload("d", None))),
        (None, orjson.dumps(_payload("t"))),
        (None, orjson.dumps(_payload("m"))),
        (None, orjson.dumps(_payload("x", None, plain))),
        (None, orjson.dumps(_payload("c", None, plain, table="nope"))),
        (None, orjson.dumps({**_payload("c", None, plain), "source": None})),
        (None, b"{not json"),
        (None, b"[]"),
        (None, _wrap({**_payload("c", None, connect)}, FIELDS[:-1])),  # the schema lacks a column
        (None, _wrap(_payload("c", None, connect), [{**f, "parameters": {}} for f in FIELDS])),
        (
            None,
            _wrap(
                _payload("c", None, {**connect, "amount": "12.50"}),
                [_field(f["field"], "string") for f in FIELDS],
            ),
        ),
        (None, orjson.dumps({"schema": {"type": "struct"}, "payload": None})),
        (None, b'{"schema":{"fields":[],"payload":1},"payload":{"op":"c"}}'),
        (None, _wrap(_payload("c", None, connect))[:-1]),
    ]
    return out


def _outcome(out: Any) -> Any:
    if isinstance(out, EventError):
        return ("refused", out.code, out.detail)
    return [(e.relation, e.row, e.delta, e.key) for e in out]


@pytest.mark.parametrize("key_field", [None, "tenant"])
@pytest.mark.parametrize("amount", ["decimal", "exact", "float", "str", "int"])
def test_the_fast_path_agrees_with_the_general_path(key_field: str | None, amount: str) -> None:
    columns: dict[str, str] = {"id": "int", "amount": amount, "day": "str", "note": "str"}
    if key_field is None:
        columns["tenant"] = "str"
    schema = Schema.of(Relation.of("orders", **columns), key_field=key_field)
    fast = ChangeCodec(ChangeSpec("debezium-json"), schema)
    general = ChangeCodec(ChangeSpec("debezium-json"), schema)
    general.fast = None
    decided = 0
    for key, value in _corpus():
        expected = _outcome(general.decode(key, value))
        assert _outcome(fast.decode(key, value)) == expected, value
        decided += fast.fast is not None and fast.fast.events(key, value) is not None
    if amount in ("decimal", "exact", "str"):
        assert decided >= 10  # the common records take the fast path
    assert fast.skipped == general.skipped


def test_the_fast_path_agrees_on_a_random_workload() -> None:
    relations = {name: Relation(name, tuple(columns.items())) for name, columns in RELATIONS.items()}
    schema = Schema(relations)
    w = workload(7, 400)
    fast = ChangeCodec(ChangeSpec("debezium-json"), schema)
    general = ChangeCodec(ChangeSpec("debezium-json"), schema)
    general.fast = None
    for r in w.records:
        assert _outcome(fast.decode(r.key, r.value)) == _outcome(general.decode(r.key, r.value))


def test_inputs_that_keep_images_or_project_take_the_general_path() -> None:
    schema = Schema.of(Relation.of("orders", id="int"))
    assert ChangeCodec(ChangeSpec("debezium-json", images=True), schema).fast is None
    assert ChangeCodec(ChangeSpec("debezium-json", project=True), schema).fast is None
    assert ChangeCodec(ChangeSpec("maxwell-json"), schema).fast is None
