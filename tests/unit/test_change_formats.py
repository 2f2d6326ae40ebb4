"""Change formats: Debezium (plain and schema-wrapped), Maxwell, Canal and upsert records decode into zero,
one or two update events (an update is a retract+insert pair, taken whole or refused whole); bad records
are refused with stable reasons, each registered and documented; files of them feed replay."""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from ivmstream.config import build_config
from ivmstream.events import EventError, Relation, Schema, UpdateEvent, read_source
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import UNAVAILABLE, ChangeSpec
from ivmstream.events.inputs import inputs_list
from ivmstream.events.reasons import CHANGE_REASONS
from ivmstream.replay import replay_all
from ivmstream.service import load_service

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Schema.of(Relation.of("orders", id="int", amount="decimal", day="str", note="str"))
ROW = {"id": 1, "amount": "12.50", "day": "2024-01-01", "note": "x"}


def _dbz(op: str, before: Any = None, after: Any = None, table: str = "orders") -> bytes:
    return orjson.dumps({"before": before, "after": after, "op": op, "source": {"table": table}, "ts_ms": 1})


def _codec(fmt: str = "debezium-json", **spec: Any) -> ChangeCodec:
    return ChangeCodec(ChangeSpec(fmt, **spec), SCHEMA)


def _rows(out: Any) -> list[tuple[int, dict[str, Any]]]:
    assert isinstance(out, list), out
    return [(e.delta, e.row) for e in out]


def _connect_field(name: str, kind: str, logical: str | None = None, **params: str) -> dict[str, Any]:
    field: dict[str, Any] = {"field": name, "type": kind}
    if logical:
        field["name"] = logical
    if params:
        field["parameters"] = params
    return field


def _wrapped(
    op: str, after: dict[str, Any] | None, before: dict[str, Any] | None = None, scale: str | None = "2"
) -> bytes:
    amount = _connect_field(
        "amount", "bytes", "org.apache.kafka.connect.data.Decimal", **({"scale": scale} if scale else {})
    )
    cols = [
        _connect_field("id", "int32"),
        amount,
        _connect_field("day", "int32", "io.debezium.time.Date"),
        _connect_field("note", "string"),
    ]
    schema = {
        "type": "struct",
        "fields": [{"field": s, "type": "struct", "fields": cols} for s in ("before", "after")],
    }
    return orjson.dumps(
        {
            "schema": schema,
            "payload": {"before": before, "after": after, "op": op, "source": {"table": "orders"}},
        }
    )


def _b64(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(8, "big", signed=True).lstrip(b"\x00") or b"\x00").decode()


def test_debezium_ops_give_zero_one_or_two_events() -> None:
    codec = _codec(relation="orders")
    new = dict(ROW, amount="13")
    assert _rows(codec.decode(None, _dbz("c", after=ROW))) == [(1, {**ROW, "amount": Decimal("12.50")})]
    assert _rows(codec.decode(None, _dbz("r", after=ROW)))[0][0] == 1
    assert [d for d, _ in _rows(codec.decode(None, _dbz("u", ROW, new)))] == [-1, 1]
    assert _rows(codec.decode(None, _dbz("d", before=ROW))) == [(-1, {**ROW, "amount": Decimal("12.50")})]
    assert codec.decode(b'{"id":1}', None) == []
    assert codec.decode(None, orjson.dumps({"op": "m", "message": {"prefix": "p"}})) == []
    assert dict(codec.skipped) == {"tombstone": 1, "message": 1}


def test_schema_wrapped_records_decode_connect_encodings() -> None:
    codec = _codec(relation="orders")
    after = {"id": 2, "amount": _b64(-1250), "day": 19723, "note": "y"}
    [event] = codec.decode(None, _wrapped("c", after))  # type: ignore[misc]
    assert event.row == {"id": 2, "amount": Decimal("-12.50"), "day": "2024-01-01", "note": "y"}
    err = codec.decode(None, _wrapped("c", after, scale=None))
    assert isinstance(err, EventError) and err.code == "decimal-without-scale"
    err = codec.decode(None, _wrapped("c", {**after, "extra": 1}))
    assert isinstance(err, EventError) and err.code == "schema-mismatch"
    err = codec.decode(None, _wrapped("c", {**after, "amount": "not base64!"}))
    assert isinstance(err, EventError) and err.code == "schema-mismatch"


def test_relation_from_the_table_and_projection_where_configured() -> None:
    wide = {**ROW, "extra": 5}
    err = _codec().decode(None, _dbz("c", after=wide))
    assert isinstance(err, EventError) and err.code == "unexpected-column"
    [event] = _codec(project=True).decode(None, _dbz("c", after=wide))  # type: ignore[misc]
    assert event.relation == "orders" and "extra" not in event.row
    err = _codec().decode(None, _dbz("c", after=ROW, table="other"))
    assert isinstance(err, EventError) and err.code == "unknown-relation"


@pytest.mark.parametrize(
    ("record", "code"),
    [
        (b"{not json", "malformed-json"),
        (b"[1]", "not-an-object"),
        (_dbz("x", after=ROW), "unknown-op"),
        (_dbz("u", None, ROW), "missing-before"),
        (_dbz("d"), "missing-before"),
        (_dbz("c", after={**ROW, "note": UNAVAILABLE}), "unavailable-value"),
        (_dbz("t"), "truncate-without-images"),
        (_dbz("u", {**ROW, "id": "one"}, ROW), "wrong-type"),
    ],
)
def test_bad_change_records_are_refused_whole_with_a_stable_reason(record: bytes, code: str) -> None:
    out = _codec().decode(None, record)
    assert isinstance(out, EventError) and out.code == code, out


def test_upsert_mode_retracts_the_last_image_and_ignores_duplicates() -> None:
    codec = _codec("upsert-json", relation="orders", images=True)
    assert _rows(codec.decode(b"1", orjson.dumps(ROW)))[0][0] == 1
    assert codec.decode(b"1", orjson.dumps(ROW)) == []  # a duplicate after a connector restart
    out = _rows(codec.decode(b"1", orjson.dumps({**ROW, "note": "y"})))
    assert [(d, r["note"]) for d, r in out] == [(-1, "x"), (1, "y")]
    assert _rows(codec.decode(b"1", None)) == [(-1, {**ROW, "amount": Decimal("12.50"), "note": "y"})]
    assert codec.decode(b"1", None) == []  # deleting an absent row again
    err = codec.decode(None, orjson.dumps(ROW))
    assert isinstance(err, EventError) and err.code == "missing-primary-key"
    assert codec.images is not None and len(codec.images) == 0


def test_debezium_in_upsert_mode_needs_no_before_image_and_truncates() -> None:
    codec = _codec(relation="orders", images=True)
    codec.decode(b'{"id":1}', _dbz("c", after=ROW))
    codec.decode(b'{"id":2}', _dbz("r", after={**ROW, "id": 2}))
    out = _rows(codec.decode(b'{"id":1}', _dbz("u", None, {**ROW, "note": "z"})))
    assert [(d, r["note"]) for d, r in out] == [(-1, "x"), (1, "z")]
    assert sorted(r["id"] for d, r in _rows(codec.decode(None, _dbz("t")))) == [1, 2]


def test_a_refused_record_leaves_the_images_as_they_were() -> None:
    codec = _codec("upsert-json", relation="orders", images=True)
    codec.decode(b"1", orjson.dumps(ROW))
    err = codec.decode(b"1", orjson.dumps({**ROW, "id": "x"}))
    assert isinstance(err, EventError) and err.code == "wrong-type"
    assert codec.images is not None and codec.images.get("orders", "1") == ROW


def test_maxwell_and_canal_before_image_is_data_overlaid_with_old() -> None:
    maxwell = _codec("maxwell-json")
    rec = {
        "database": "shop",
        "table": "orders",
        "type": "update",
        "data": {**ROW, "note": "new"},
        "old": {"note": "x"},
    }
    out = _rows(maxwell.decode(None, orjson.dumps(rec)))
    assert [(d, r["note"]) for d, r in out] == [(-1, "x"), (1, "new")]
    assert maxwell.decode(None, orjson.dumps({"type": "bootstrap-start", "table": "orders"})) == []
    canal = _codec("canal-json")
    text = {"id": "1", "amount": "12.50", "day": "2024-01-01", "note": "new"}
    rec = {
        "table": "orders",
        "type": "UPDATE",
        "isDdl": False,
        "data": [text, {**text, "id": "2"}],
        "old": [{"note": "x"}, {"note": "y"}],
    }
    out = _rows(canal.decode(None, orjson.dumps(rec)))
    assert [(d, r["id"], r["note"]) for d, r in out] == [
        (-1, 1, "x"),
        (1, 1, "new"),
        (-1, 2, "y"),
        (1, 2, "new"),
    ]
    err = canal.decode(None, orjson.dumps({**rec, "data": [{**text, "id": "one"}], "old": [{}]}))
    assert isinstance(err, EventError) and err.code == "wrong-type"
    assert canal.decode(None, orjson.dumps({"isDdl": True, "type": "ALTER", "sql": "..."})) == []


def test_inputs_config_parses_and_refuses_in_one_line() -> None:
    [native, dbz] = inputs_list([{"topic": "a"}, {"topic": "b", "format": "debezium-json", "relation": "t"}])
    assert native.change is None and dbz.change is not None and not dbz.change.images
    for bad, words in [
        ([{"topic": "a b"}], "topic must be"),
        ([{"topic": "a", "format": "avro"}], "format must be one of"),
        ([{"topic": "a", "format": "upsert-json"}], "needs relation"),
        ([{"topic": "a"}, {"topic": "a"}], "each topic once"),
        ([{"topic": "a", "relation": "t"}], "applies to change formats"),
    ]:
        with pytest.raises(ValueError, match=words):
            inputs_list(bad)


def test_change_files_replay_like_the_records(tmp_path: Path) -> None:
    service = load_service("reference")
    config = build_config(
        service, {"relations": {"orders": {"id": "int", "amount": "decimal", "day": "str", "note": "str"}}}
    )
    lines = [
        _dbz("r", after=ROW),
        _dbz("c", after={**ROW, "id": 2}),
        _wrapped(
            "u",
            {"id": 2, "amount": _b64(99), "day": 0, "note": "x"},
            {**ROW, "id": 2, "amount": _b64(1250), "day": 19723},
        ),
        _dbz("d", before=ROW),
        _dbz("x"),
    ]
    path = tmp_path / "orders.json"
    path.write_bytes(b"\n".join(lines) + b"\n")
    records = list(read_source(path, "debezium-json", schema=SCHEMA))
    assert [r.lineno for r in records] == [1, 2, 3, 3, 4, 5] and records[-1].error is not None
    rejected: list[Any] = []
    run = replay_all(service, config, records, rejected.append)
    assert run.result()["count"] == 1 and run.rejected == 1
    assert [(r.lineno, r.code) for r in rejected] == [(5, "unknown-op")]  # its reason, not unreadable-line
    assert records[-1].refusal().startswith("unknown-op: op 'x'")


def test_every_change_reason_is_registered_and_documented() -> None:
    emitted = set()
    for name in ("changes", "connect", "debezium", "binlog", "upsert", "change_formats"):
        text = (ROOT / "shared" / "events" / f"{name}.py").read_text()
        emitted |= set(re.findall(r'EventError\(\s*"([a-z-]+)"', text))
    own = emitted - {"malformed-json", "not-an-object", "unknown-relation", "wrong-type"}
    assert own <= set(CHANGE_REASONS), own - set(CHANGE_REASONS)
    page = (ROOT / "docs" / "change-data.md").read_text()
    assert all(f"`{code}`" in page for code in CHANGE_REASONS)


def test_events_are_update_events() -> None:
    out = _codec().decode(None, _dbz("c", after=ROW))
    assert isinstance(out, list) and all(isinstance(e, UpdateEvent) for e in out)
