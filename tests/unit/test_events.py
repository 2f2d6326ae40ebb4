"""The update-event codec: round trips, every rejection code, and robustness against garbage."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import (
    CODECS,
    COLUMN_TYPES,
    EventCodec,
    EventError,
    Relation,
    Schema,
    UpdateEvent,
    encode_event,
)
from ivmstream.events.reasons import REASONS, shown

TRADES = Relation.of("trades", qty="int", sym="str")
ALL = Relation.of("all", i="int", f="float", n="number", s="str", b="bool", d="decimal")
CODEC = EventCodec(Schema.of(TRADES, ALL))
KEYED = EventCodec(Schema.of(TRADES, ALL, key_field="acct"))

INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what orjson reads and writes as int
FINITE = st.floats(allow_nan=False, allow_infinity=False)


def raw(relation: Any = "trades", row: Any = None, delta: Any = 1, **extra: Any) -> bytes:
    obj = {"relation": relation, "row": {"qty": 5, "sym": "AB"} if row is None else row, "delta": delta}
    obj.update(extra)
    return orjson.dumps(obj)


def all_row(**over: Any) -> dict[str, Any]:
    row = {"i": 1, "f": 1.5, "n": 2, "s": "x", "b": True, "d": "1.25"}
    row.update(over)
    return row


def rejects(codec: EventCodec, value: Any, code: str) -> EventError:
    with pytest.raises(EventError) as info:
        codec.decode(value)
    assert info.value.code == code, info.value
    assert str(info.value) == f"{code}: {info.value.detail}"
    return info.value


# --- round trips ---------------------------------------------------------------------------------

# raw JSON value per column type, and the value the codec must produce from it (computed here)
RAW_VALUES = {
    "int": INT64.map(lambda v: (v, v)),
    "float": st.one_of(FINITE, st.integers(-(2**53), 2**53)).map(lambda v: (v, float(v))),
    "number": st.one_of(FINITE, INT64).map(lambda v: (v, v)),
    "str": st.text().map(lambda v: (v, v)),
    "bool": st.booleans().map(lambda v: (v, v)),
    "decimal": st.one_of(
        INT64.map(lambda v: (v, Decimal(v))),
        st.tuples(st.integers(-(10**30), 10**30), st.integers(-30, 30))
        .map(lambda t: str(Decimal(t[0]).scaleb(t[1])))
        .map(lambda d: (d, Decimal(d))),
        FINITE.map(lambda v: (v, Decimal(repr(v)))),
    ),
    "exact": st.one_of(
        INT64.map(lambda v: (v, v)),  # ints stay ints
        st.tuples(st.integers(-(10**30), 10**30), st.integers(-30, 30))
        .map(lambda t: str(Decimal(t[0]).scaleb(t[1])))
        .map(lambda d: (d, Decimal(d))),
        FINITE.map(lambda v: (v, Decimal(repr(v)))),
    ),
}


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type, with -0.0 vs 0.0 and Decimal exponents told apart."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return repr(a) == repr(b)
    if type(a) is Decimal:
        return str(a) == str(b)
    return a == b


@st.composite
def schema_and_event(draw: st.DrawFn) -> tuple[EventCodec, dict[str, Any], UpdateEvent]:
    types = draw(st.lists(st.sampled_from(sorted(COLUMN_TYPES)), min_size=1, max_size=7))
    rel = Relation("rel", tuple((f"c{i}", t) for i, t in enumerate(types)))
    keyed = draw(st.booleans())
    codec = EventCodec(Schema.of(rel, key_field="k" if keyed else None))
    row: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for col, typ in rel.columns:
        row[col], expected[col] = draw(RAW_VALUES[typ])
    key = None
    if keyed:
        kv = draw(st.one_of(st.text(), st.integers(-(2**63), 2**63 - 1)))
        row["k"] = kv
        key = str(kv)
    delta = draw(st.integers(-(2**63), 2**63 - 1).filter(bool))
    obj = {"relation": "rel", "row": row, "delta": delta}
    return codec, obj, UpdateEvent("rel", expected, delta, key)


@given(schema_and_event())
def test_decode_encode_round_trip(case: tuple[EventCodec, dict[str, Any], UpdateEvent]) -> None:
    codec, obj, expected = case
    ev = codec.decode(orjson.dumps(obj))
    assert ev.relation == expected.relation and ev.delta == expected.delta and ev.key == expected.key
    assert list(ev.row) == list(expected.row)
    for col, v in expected.row.items():
        assert same(ev.row[col], v), (col, ev.row[col], v)
    wire = codec.encode(ev)
    assert wire == encode_event(ev, codec.schema.key_field)
    again = codec.decode(wire)
    assert again == ev
    assert all(same(again.row[c], ev.row[c]) for c in ev.row)
    # and the wire form is the documented event shape, with the key back in the row
    back = orjson.loads(wire)
    assert set(back) == {"relation", "row", "delta"}
    if codec.schema.key_field is not None:
        assert back["row"]["k"] == expected.key
    else:
        assert "k" not in back["row"]


def test_round_trip_of_every_type_concretely() -> None:
    src = raw("all", all_row(i=-7, f=3, n=2.5, s="é\n", b=False, d=0.1), delta=-3)
    ev = CODEC.decode(src)
    assert ev == UpdateEvent(
        "all", {"i": -7, "f": 3.0, "n": 2.5, "s": "é\n", "b": False, "d": Decimal("0.1")}, -3
    )
    assert type(ev.row["f"]) is float
    assert CODEC.decode(CODEC.encode(ev)) == ev
    assert CODEC.decode(src.decode()) == ev  # str input as well as bytes


def test_key_field_int_key_becomes_string_and_is_written_back() -> None:
    ev = KEYED.decode(raw(row={"qty": 1, "sym": "A", "acct": 42}))
    assert ev.key == "42" and ev.row == {"qty": 1, "sym": "A"}
    assert orjson.loads(KEYED.encode(ev))["row"] == {"qty": 1, "sym": "A", "acct": "42"}
    assert KEYED.decode(KEYED.encode(ev)) == ev
    # without key_field the key is not written
    assert "acct" not in orjson.loads(encode_event(ev))["row"]


def test_codec_registry() -> None:
    assert CODECS["json"] is EventCodec and list(CODECS) == ["json"]


# --- rejections ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (b"{not json", "malformed-json"),
        (b'{"relation": "trades", "row": {"qty": 1', "malformed-json"),
        (b"\xff\xfe\x00", "invalid-utf8"),
        (b"", "malformed-json"),
        (b"NaN", "non-finite-number"),
        (b"[" * 2000, "too-deep"),
    ],
    ids=["bad-bytes", "truncated", "invalid-utf8", "empty", "nan-literal", "too-deep"],
)
def test_malformed_json(value: bytes, code: str) -> None:
    err = rejects(CODEC, value, code)
    # too deep is decided from the brackets before parsing; the others are the parser's refusals
    assert err.detail.startswith("JSON nested deeper" if code == "too-deep" else "not valid JSON")


def test_malformed_json_none_value() -> None:
    err = rejects(CODEC, None, "malformed-json")
    assert "empty record value" in err.detail


@pytest.mark.parametrize(
    ("value", "typename"),
    [(b"[1, 2]", "list"), (b"42", "int"), (b"1.5", "float"), (b'"s"', "str"), (b"null", "NoneType")],
)
def test_not_an_object(value: bytes, typename: str) -> None:
    err = rejects(CODEC, value, "not-an-object")
    assert err.detail == f"an event must be a JSON object, got {typename}"


@pytest.mark.parametrize(
    ("row", "typename"), [([5, "AB"], "list"), (5, "int"), ("r", "str"), (None, "NoneType")]
)
def test_row_not_an_object(row: Any, typename: str) -> None:
    err = rejects(CODEC, orjson.dumps({"relation": "trades", "row": row, "delta": 1}), "not-an-object")
    assert err.detail == f"row must be a JSON object, got {typename}"


@pytest.mark.parametrize(
    ("obj", "missing"),
    [
        ({"relation": "trades", "row": {}}, "delta"),
        ({"relation": "trades", "delta": 1}, "row"),
        ({"row": {}, "delta": 1}, "relation"),
        ({"relation": "trades"}, "delta, row"),
        ({}, "delta, relation, row"),
        ({"relation": "trades", "row": {}, "extra": 1}, "delta"),  # missing wins over unknown
    ],
)
def test_missing_field(obj: dict[str, Any], missing: str) -> None:
    err = rejects(CODEC, orjson.dumps(obj), "missing-field")
    assert err.detail == f"event lacks {missing}"


def test_unknown_field() -> None:
    err = rejects(CODEC, raw(ts=1, zz=2), "unknown-field")
    assert err.detail == "event has unknown field(s) ts, zz"


@pytest.mark.parametrize("relation", ["nope", "TRADES", "", 5, None, ["trades"], {"a": 1}])
def test_unknown_relation(relation: Any) -> None:
    err = rejects(CODEC, raw(relation=relation), "unknown-relation")
    assert shown(relation) in err.detail
    assert "known: all, trades" in err.detail


@pytest.mark.parametrize("delta", [1.0, 1.5, "1", True, False, None, [1], {"d": 1}])
def test_bad_delta(delta: Any) -> None:
    err = rejects(CODEC, raw(delta=delta), "bad-delta")
    assert err.detail == f"delta must be an integer, got {shown(delta)}"


@pytest.mark.parametrize("text", [b"0", b"-0"])
def test_zero_delta(text: bytes) -> None:
    value = b'{"relation":"trades","row":{"qty":1,"sym":"A"},"delta":' + text + b"}"
    err = rejects(CODEC, value, "zero-delta")
    assert "delta is 0" in err.detail


def test_large_and_negative_deltas_accepted() -> None:
    assert CODEC.decode(raw(delta=-(2**63))).delta == -(2**63)
    assert CODEC.decode(raw(delta=7)).delta == 7


@pytest.mark.parametrize(("row", "col"), [({"sym": "A"}, "qty"), ({"qty": 1}, "sym"), ({}, "qty")])
def test_missing_column(row: dict[str, Any], col: str) -> None:
    err = rejects(CODEC, raw(row=row), "missing-column")
    assert err.detail == f"trades.{col} is missing"


def test_missing_column_beats_unexpected() -> None:
    err = rejects(CODEC, raw(row={"qty": 1, "px": 2}), "missing-column")
    assert err.detail == "trades.sym is missing"


@pytest.mark.parametrize(
    ("row", "extra"),
    [({"qty": 1, "sym": "A", "px": 2}, "px"), ({"qty": 1, "sym": "A", "z": None, "a": 1}, "a, z")],
)
def test_unexpected_column(row: dict[str, Any], extra: str) -> None:
    err = rejects(CODEC, raw(row=row), "unexpected-column")
    assert err.detail == f"trades has unexpected column(s) {extra}"


def test_unexpected_column_with_key_field_names_only_the_extra() -> None:
    err = rejects(KEYED, raw(row={"qty": 1, "sym": "A", "acct": "x", "px": 2}), "unexpected-column")
    assert err.detail == "trades has unexpected column(s) px"


@pytest.mark.parametrize("col", ["i", "f", "n", "s", "b", "d"])
def test_null_value(col: str) -> None:
    err = rejects(CODEC, raw("all", all_row(**{col: None})), "null-value")
    assert err.detail == f"all.{col} is null"


@pytest.mark.parametrize(
    ("col", "value", "expect"),
    [
        ("i", True, "an integer"),  # bool is not an int here
        ("i", False, "an integer"),
        ("i", "5", "an integer"),
        ("i", 5.0, "an integer"),
        ("i", [5], "an integer"),
        ("i", {"v": 5}, "an integer"),
        ("f", True, "a number"),
        ("f", "1.5", "a number"),
        ("n", False, "a number"),
        ("n", "2", "a number"),
        ("n", [], "a number"),
        ("s", 5, "a string"),
        ("s", True, "a string"),
        ("s", ["x"], "a string"),
        ("b", 1, "a boolean"),
        ("b", 0, "a boolean"),
        ("b", "true", "a boolean"),
        ("d", True, "a decimal number or decimal string"),
        ("d", "abc", "a decimal number or decimal string"),
        ("d", "", "a decimal number or decimal string"),
        ("d", "NaN", "a finite decimal"),
        ("d", "sNaN", "a finite decimal"),
        ("d", "Infinity", "a finite decimal"),
        ("d", "-inf", "a finite decimal"),
        ("d", [1], "a decimal number or decimal string"),
    ],
)
def test_wrong_type(col: str, value: Any, expect: str) -> None:
    err = rejects(CODEC, raw("all", all_row(**{col: value})), "wrong-type")
    typ = dict(ALL.columns)[col]
    assert err.detail == f"all.{col} must be {expect} ({typ}), got {shown(value)}"


def test_wrong_type_in_trades_names_relation_and_column() -> None:
    err = rejects(CODEC, raw(row={"qty": True, "sym": "A"}), "wrong-type")
    assert err.detail.startswith("trades.qty must be an integer (int)")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_decimal_rejects_non_finite_floats(value: float) -> None:
    # JSON cannot carry these; validate() still must not accept them from a Python caller
    with pytest.raises(EventError) as info:
        CODEC.validate({"relation": "all", "row": all_row(d=value), "delta": 1})
    assert info.value.code == "wrong-type"
    assert info.value.detail.startswith("all.d must be a finite decimal (decimal)")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, "12"),
        (-(2**63), str(-(2**63))),
        ("12.340", "12.340"),
        ("-0.000001", "-0.000001"),
        ("1E+3", "1E+3"),
        ("123456789012345678901234567890.123456789", "123456789012345678901234567890.123456789"),
        (0.1, "0.1"),  # the shortest repr, not the binary expansion
        (2.675, "2.675"),
        (1e-7, "1E-7"),
        (-0.0, "-0.0"),
    ],
)
def test_decimal_accepts_exact(value: Any, expected: str) -> None:
    ev = CODEC.decode(raw("all", all_row(d=value)))
    assert type(ev.row["d"]) is Decimal
    assert str(ev.row["d"]) == expected
    assert ev.row["d"] == Decimal(expected)
    assert CODEC.decode(CODEC.encode(ev)).row["d"].as_tuple() == ev.row["d"].as_tuple()


def test_float_accepts_int_and_number_keeps_type() -> None:
    ev = CODEC.decode(raw("all", all_row(f=3, n=3)))
    assert type(ev.row["f"]) is float and ev.row["f"] == 3.0
    assert type(ev.row["n"]) is int


def test_missing_key() -> None:
    err = rejects(KEYED, raw(row={"qty": 1, "sym": "A"}), "missing-key")
    assert err.detail == "row lacks the partition key field 'acct'"


@pytest.mark.parametrize("kv", [True, 1.5, None, [1], {"a": 1}])
def test_key_of_wrong_type(kv: Any) -> None:
    err = rejects(KEYED, raw(row={"qty": 1, "sym": "A", "acct": kv}), "wrong-type")
    assert err.detail == "key field 'acct' must be a string or integer"


def test_decode_many_keeps_errors_in_place_and_keeps_going() -> None:
    values = [raw(), b"junk", None, raw(delta=0), raw(row={"qty": 2, "sym": "B"}, delta=-1), b"[]"]
    out = CODEC.decode_many(values)
    assert len(out) == len(values)
    assert out[0] == UpdateEvent("trades", {"qty": 5, "sym": "AB"}, 1)
    assert out[4] == UpdateEvent("trades", {"qty": 2, "sym": "B"}, -1)
    codes = [o.code if isinstance(o, EventError) else None for o in out]
    assert codes == [None, "malformed-json", "malformed-json", "zero-delta", None, "not-an-object"]
    assert CODEC.decode_many([]) == []


# --- schema construction ---------------------------------------------------------------------------


def test_relation_and_schema_validation() -> None:
    with pytest.raises(ValueError, match=r"column 'a' has unknown type 'integer'"):
        Relation.of("r", a="integer")
    with pytest.raises(ValueError, match="duplicate column names"):
        Relation("r", (("a", "int"), ("a", "str")))
    with pytest.raises(ValueError, match="key_field 'qty' collides with a column of relation 'trades'"):
        Schema.of(TRADES, key_field="qty")
    assert TRADES.column_names == ("qty", "sym")


# --- garbage never raises anything but EventError --------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | INT64 | FINITE | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)
NAMES = ["qty", "sym", "acct", "i", "f", "n", "s", "b", "d", "x"]
SCALAR = st.none() | st.booleans() | st.integers(-3, 3) | INT64 | FINITE | st.sampled_from(["", "1.5", "x"])
NEAR_VALID = st.fixed_dictionaries(
    {},
    optional={
        "relation": st.sampled_from(["trades", "all", "nope", 1]),
        "row": st.dictionaries(st.sampled_from(NAMES), SCALAR | st.lists(SCALAR, max_size=2), max_size=9),
        "delta": SCALAR,
        "extra": SCALAR,
    },
)


def decode_or_event_error(codec: EventCodec, value: Any) -> None:
    try:
        ev = codec.decode(value)
    except EventError as err:
        assert err.code in REASONS
    else:
        assert isinstance(ev, UpdateEvent) and ev.delta != 0


@settings(max_examples=150)
@given(JSON)
def test_random_json_only_event_errors(value: Any) -> None:
    for codec in (CODEC, KEYED):
        decode_or_event_error(codec, orjson.dumps(value))


@settings(max_examples=200)
@given(NEAR_VALID)
def test_near_valid_objects_only_event_errors(value: Any) -> None:
    for codec in (CODEC, KEYED):
        decode_or_event_error(codec, orjson.dumps(value))


@given(st.binary(max_size=64))
def test_random_bytes_only_event_errors(value: bytes) -> None:
    decode_or_event_error(CODEC, value)


@given(st.text(max_size=32))
def test_random_text_only_event_errors(value: str) -> None:
    decode_or_event_error(KEYED, value)


def test_decoded_floats_are_finite() -> None:
    # orjson rejects numbers that overflow a double, so no inf reaches a float column
    err = rejects(
        CODEC,
        b'{"relation":"all","row":{"i":1,"f":1e400,"n":1,"s":"","b":true,"d":1},"delta":1}',
        "non-finite-number",
    )
    assert "infinity" in err.detail
    ev = CODEC.decode(raw("all", all_row(f=1.7976931348623157e308)))
    assert math.isfinite(ev.row["f"])
