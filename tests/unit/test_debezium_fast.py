"""The Debezium fast path (ivmstream.events.debezium_fast) decides only the records it decodes exactly as
the general path does: over a corpus of good, odd and bad records, plain and wrapped, keyed and keyless,
a codec with the fast path gives what the general path alone gives, record by record. Its compiled tier
(C, first) is checked the same way against both, on the corpus and on mutations of it."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

import orjson
import pytest
from helpers_cdc import RELATIONS, workload
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventError, Relation, Schema
from ivmstream.events.change_formats import ChangeCodec
from ivmstream.events.changes import UNAVAILABLE, ChangeSpec
from ivmstream.events.codec import PURE_PYTHON_ENV
from ivmstream.events.debezium_fast import FastDebezium, compiled_available

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


# --- the compiled tier (events/_fastjson.c decode_debezium) -----------------------------------------

compiled_only = pytest.mark.skipif(not compiled_available(), reason="the compiled decoder is not built")


def _tiers(schema: Schema, relation: str | None = None) -> tuple[ChangeCodec, ChangeCodec, ChangeCodec]:
    """Codecs decoding in C first, in Python's converters first, and by the general path alone."""
    spec = ChangeSpec("debezium-json", relation)
    c, python, general = ChangeCodec(spec, schema), ChangeCodec(spec, schema), ChangeCodec(spec, schema)
    python.fast = FastDebezium(spec, schema, compiled=False)
    general.fast = None
    return c, python, general


@compiled_only
@pytest.mark.parametrize("relation", [None, "orders"])
@pytest.mark.parametrize("key_field", [None, "tenant"])
@pytest.mark.parametrize("amount", ["decimal", "exact", "float", "str", "int"])
def test_the_compiled_tier_agrees_with_python_and_the_general_path(
    key_field: str | None, amount: str, relation: str | None
) -> None:
    columns: dict[str, str] = {"id": "int", "amount": amount, "day": "str", "note": "str"}
    if key_field is None:
        columns["tenant"] = "str"
    schema = Schema.of(Relation.of("orders", **columns), key_field=key_field)
    c, python, general = _tiers(schema, relation)
    in_c = 0
    for key, value in _corpus():
        expected = _outcome(general.decode(key, value))
        assert _outcome(python.decode(key, value)) == expected, value
        assert _outcome(c.decode(key, value)) == expected, value
        assert c.fast is not None
        in_c += value is not None and (
            c.fast._c_plain is not None
            and value[:10] != b'{"schema":'
            and c.fast._c_plain.decode_debezium(value, 0, len(value), relation) is not None
        )
    if amount in ("decimal", "exact", "str"):
        assert in_c >= 8  # the plain common records are decided in C


@compiled_only
def test_wrapped_connect_decimals_are_decided_in_c() -> None:
    """A wrapped record whose only encoded column is a Connect decimal is decoded in C (its decoder is
    built for the schema text); a date column the view reads as text leaves it to Python."""
    fields = [f for f in FIELDS if f["field"] != "day"]
    schema = Schema.of(Relation.of("orders", id="int", amount="decimal", note="str", tenant="str"))
    c, _python, general = _tiers(schema)
    row = {"id": 1, "amount": _b64(-1250), "note": "x", "tenant": "t1"}
    for op, before, after in (("c", None, row), ("u", row, {**row, "amount": _b64(7)}), ("d", row, None)):
        value = _wrap(_payload(op, before, after), fields)
        assert _outcome(c.decode(None, value)) == _outcome(general.decode(None, value))
    assert c.fast is not None and len(c.fast._c_wrapped) == 1
    [decoder] = c.fast._c_wrapped.values()
    value = _wrap(_payload("c", None, row), fields)
    start = value.find(b',"payload":') + 11
    [event] = decoder.decode_debezium(value, start, len(value) - 1, None)
    assert event.row["amount"] == Decimal("-12.50") and str(event.row["amount"]) == "-12.50"
    with_date = _wrap(_payload("c", None, {**row, "day": 19723}))
    dated = Schema.of(Relation.of("orders", id="int", amount="decimal", day="str", note="str", tenant="str"))
    c2, _p, general2 = _tiers(dated)
    assert _outcome(c2.decode(None, with_date)) == _outcome(general2.decode(None, with_date))
    assert c2.fast is not None and list(c2.fast._c_wrapped.values()) == [None]


@compiled_only
@settings(max_examples=150, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1), st.integers(0, 30), st.integers(1, 8))
def test_connect_decimals_in_c_are_pythons(unscaled: int, scale: int, width: int) -> None:
    """Base64 of a two's-complement integer of ``width`` bytes (where it fits) and a scale: the C
    decoder makes the Decimal that Decimal(unscaled).scaleb(-scale) is, digits and exponent."""
    if not -(2 ** (8 * width - 1)) <= unscaled < 2 ** (8 * width - 1):
        unscaled %= 2 ** (8 * width - 1)
    field = _field("amount", "bytes", DECIMAL, scale=str(scale))
    schema = Schema.of(Relation.of("orders", id="int", amount="decimal"))
    text = base64.b64encode(unscaled.to_bytes(width, "big", signed=True)).decode()
    value = _wrap(_payload("c", None, {"id": 1, "amount": text}), [_field("id", "int64"), field])
    c, _python, general = _tiers(schema)
    got = c.decode(None, value)
    assert _outcome(got) == _outcome(general.decode(None, value))
    assert not isinstance(got, EventError)
    expected = Decimal(unscaled).scaleb(-scale)
    assert got[0].row["amount"].as_tuple() == expected.as_tuple()


def _mutations(value: bytes, data: st.DataObject) -> bytes:
    """``value`` with a few bytes deleted, replaced or inserted (JSON's punctuation and odd bytes)."""
    alphabet = b' "{}[],:0-9.e\\nulltrue\x00\xff\xc3'
    out = bytearray(value)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, max(0, len(out) - 1)))
        kind = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        byte = data.draw(st.sampled_from(list(alphabet)))
        if kind == "delete" and out:
            del out[at]
        elif kind == "replace" and out:
            out[at] = byte
        else:
            out.insert(at, byte)
    return bytes(out)


_VALUED = [r for r in _corpus() if r[1] is not None]
_MUTATED_TIERS = _tiers(
    Schema.of(Relation.of("orders", id="int", amount="decimal", day="str", note="str", tenant="str"))
)


@compiled_only
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_compiled_tier_agrees_on_mutated_records(data: st.DataObject) -> None:
    """Records of the corpus with bytes deleted, replaced or inserted, keys reordered and spaced: the
    codec deciding in C first gives what the general path gives (a reason where it refuses)."""
    key, value = data.draw(st.sampled_from(_VALUED))
    assert value is not None
    if data.draw(st.booleans()) and value[:10] != b'{"schema":':
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            items = list(obj.items())
            order = data.draw(st.permutations(range(len(items))))
            members = (orjson.dumps(items[i][0]) + b" : " + orjson.dumps(items[i][1]) for i in order)
            value = b"{ " + b" , ".join(members) + b" }"
    if data.draw(st.booleans()):
        value = _mutations(value, data)
    c, python, general = _MUTATED_TIERS
    expected = _outcome(general.decode(key, value))
    assert _outcome(c.decode(key, value)) == expected
    assert _outcome(python.decode(key, value)) == expected


def test_pure_python_leaves_c_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    schema = Schema.of(Relation.of("orders", id="int"))
    fast = FastDebezium(ChangeSpec("debezium-json"), schema)
    assert not fast.compiled and fast._c_plain is None
