"""The compiled decoder against the reference decoder on explicit edge cases: numbers at every column
type's limits, key fields, whitespace, malformed records, escapes, non-ASCII names, member order,
duplicates, zero-column and widest relations (the helpers in codec_cases.py)."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import orjson
import pytest

from ivmstream.events import EventCodec, Relation, Schema
from tests.unit.codec_cases import (
    KEYED,
    KEYED_UNICODE,
    PLAIN,
    TYPED,
    Outcome,
    Recorder,
    accepted,
    codec_module,
    codecs,
    outcome,
    reference,
    rejected,
    typed,
    value_of,
    verdicts,
)

# --- explicit edge cases ------------------------------------------------------------------------------

# Beyond 64 bits (below -2**63 or above 2**64-1) orjson reads an integer as a float: the reference refuses it.
# (typ, JSON text, expected outcome)
NUMBER_CASES = [
    # 18 digits: the largest the C parser reads itself
    ("int", "999999999999999999", value_of("int", 999999999999999999)),
    ("int", "-999999999999999999", value_of("int", -999999999999999999)),
    ("float", "999999999999999999", value_of("float", 1e18)),
    ("number", "999999999999999999", value_of("number", 999999999999999999)),
    ("exact", "-999999999999999999", value_of("exact", -999999999999999999)),
    # 19 digits: declined, still 64-bit integers for the reference
    ("int", "1000000000000000000", value_of("int", 10**18)),
    ("int", "9223372036854775807", value_of("int", 2**63 - 1)),
    ("int", "-9223372036854775808", value_of("int", -(2**63))),
    ("int", "9223372036854775808", value_of("int", 2**63)),
    ("float", "9223372036854775808", value_of("float", float(2**63))),
    ("number", "-9223372036854775808", value_of("number", -(2**63))),
    ("exact", "9223372036854775808", value_of("exact", 2**63)),
    # 20 digits within 64 bits
    ("int", "18446744073709551615", value_of("int", 2**64 - 1)),
    ("int", "10000000000000000000", value_of("int", 10**19)),
    ("number", "10000000000000000000", value_of("number", 10**19)),
    ("exact", "18446744073709551615", value_of("exact", 2**64 - 1)),
    # beyond 64 bits: refused, never rounded to a float
    ("int", "-9223372036854775809", rejected("integer-out-of-range")),
    ("int", "18446744073709551616", rejected("integer-out-of-range")),
    ("int", "99999999999999999999", rejected("integer-out-of-range")),
    ("float", "99999999999999999999", rejected("integer-out-of-range")),
    ("number", "99999999999999999999", rejected("integer-out-of-range")),
    ("number", "-9223372036854775809", rejected("integer-out-of-range")),
    ("exact", "99999999999999999999", rejected("integer-out-of-range")),
    ("decimal", "99999999999999999999", rejected("integer-out-of-range")),
    ("decimal", "18446744073709551615", value_of("decimal", Decimal(2**64 - 1))),
    # signs and zeros
    ("int", "-0", value_of("int", 0)),
    ("float", "-0", value_of("float", 0.0)),  # the integer 0, as a float
    ("float", "-0.0", value_of("float", -0.0)),
    ("number", "-0", value_of("number", 0)),
    ("number", "-0.0", value_of("number", -0.0)),
    ("exact", "-0", value_of("exact", 0)),
    ("exact", "-0.0", value_of("exact", Decimal("-0.0"))),
    # exponents
    ("float", "1E5", value_of("float", 100000.0)),
    ("float", "1e-5", value_of("float", 1e-05)),
    ("float", "1.5e+3", value_of("float", 1500.0)),
    ("number", "1E5", value_of("number", 100000.0)),
    ("number", "1e-5", value_of("number", 1e-05)),
    ("number", "1.5e+3", value_of("number", 1500.0)),
    ("number", "1e0", value_of("number", 1.0)),
    ("float", "1e-400", value_of("float", 0.0)),
    ("float", "1e400", rejected("non-finite-number")),
    ("float", "1.7976931348623157e308", value_of("float", 1.7976931348623157e308)),
    ("float", "5e-324", value_of("float", 5e-324)),
    ("float", "2.4703282292062328e-324", value_of("float", 5e-324)),  # just above half the least subnormal
    ("float", "0.1000000000000000055511151231257827021181583404541015625", value_of("float", 0.1)),
    ("float", "9007199254740993.0", value_of("float", 9007199254740992.0)),  # a tie: to even
    # integers in float columns round as float(int)
    ("float", "3", value_of("float", 3.0)),
    ("float", "9007199254740993", value_of("float", float(2**53 + 1))),
    ("float", "-9007199254740995", value_of("float", float(-(2**53) - 3))),
    ("float", "123456789012345678", value_of("float", float(123456789012345678))),
    # exact: ints stay ints, the rest is a Decimal of what was written (via the fallback)
    ("exact", "7", value_of("exact", 7)),
    ("exact", "1.5", value_of("exact", Decimal("1.5"))),
    ("exact", "1E5", value_of("exact", Decimal("100000.0"))),
    ("exact", '"1.50"', value_of("exact", Decimal("1.50"))),
    ("exact", '"NaN"', rejected("wrong-type")),
    ("exact", "true", rejected("wrong-type")),
    ("decimal", "7", value_of("decimal", Decimal(7))),
    ("decimal", "0.1", value_of("decimal", Decimal("0.1"))),
    ("decimal", '"2.50"', value_of("decimal", Decimal("2.50"))),
    # not JSON numbers
    ("int", "01", rejected("malformed-json")),
    ("int", "-01", rejected("malformed-json")),
    ("float", "00.5", rejected("malformed-json")),
    ("number", "1.", rejected("malformed-json")),
    ("number", ".5", rejected("malformed-json")),
    ("number", "+1", rejected("malformed-json")),
    ("number", "1.e5", rejected("malformed-json")),
    ("number", "1e", rejected("malformed-json")),
    ("number", "-", rejected("malformed-json")),
    ("int", "0x10", rejected("malformed-json")),
    ("number", "NaN", rejected("non-finite-number")),
    ("float", "Infinity", rejected("non-finite-number")),
    # wrong JSON types
    ("int", "true", rejected("wrong-type")),
    ("int", "1.0", rejected("wrong-type")),
    ("int", '"1"', rejected("wrong-type")),
    ("float", "false", rejected("wrong-type")),
    ("number", "true", rejected("wrong-type")),
    ("bool", "1", rejected("wrong-type")),
    ("bool", "tru", rejected("malformed-json")),
    ("bool", "True", rejected("malformed-json")),
    ("bool", "true", value_of("bool", True)),
    ("str", "1", rejected("wrong-type")),
    ("str", "[]", rejected("wrong-type")),
    ("int", "null", rejected("null-value")),
    ("str", "null", rejected("null-value")),
    ("bool", "nul", rejected("malformed-json")),
    # strings
    ("str", '""', value_of("str", "")),
    ("str", '"a\\u0062"', value_of("str", "ab")),
    ("str", '"\\ud83d\\ude00"', value_of("str", "😀")),
    ("str", '"\\ud800"', rejected("invalid-utf8")),
    ("str", '"\\"\\\\\\/\\b\\f\\n\\r\\t"', value_of("str", '"\\/\b\f\n\r\t')),
    ("str", '"\x7f"', value_of("str", "\x7f")),
    ("str", '"\t"', rejected("malformed-json")),  # a raw control character
    ("str", '"\\x41"', rejected("malformed-json")),
]


@pytest.mark.parametrize(("typ", "text", "expected"), NUMBER_CASES)
def test_column_value_edge_cases(typ: str, text: str, expected: Outcome) -> None:
    """Each column type on the literals where parsers differ: digits, signs, exponents, zeros, escapes."""
    value = typed(typ, text)
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


KEY_CASES = [
    ('"abc"', value_of("int", 1, "abc")),
    ('""', value_of("int", 1, "")),
    ('"\\u00e7"', value_of("int", 1, "ç")),
    ("12", value_of("int", 1, "12")),
    ("-0", value_of("int", 1, "0")),
    ("999999999999999999", value_of("int", 1, "999999999999999999")),
    ("-9223372036854775808", value_of("int", 1, "-9223372036854775808")),
    ("18446744073709551615", value_of("int", 1, "18446744073709551615")),
    ("18446744073709551616", rejected("integer-out-of-range")),  # orjson would read a float
    ("99999999999999999999", rejected("integer-out-of-range")),
    ("1.5", rejected("wrong-type")),
    ("1.0", rejected("wrong-type")),
    ("1e2", rejected("wrong-type")),
    ("true", rejected("wrong-type")),
    ("false", rejected("wrong-type")),
    ("null", rejected("wrong-type")),
    ("[1]", rejected("wrong-type")),
    ("01", rejected("malformed-json")),
]


@pytest.mark.parametrize(("key", "expected"), KEY_CASES)
def test_key_field_edge_cases(key: str, expected: Outcome) -> None:
    """The partition key: a string, or an integer as its decimal text; nothing else."""
    value = typed("int", "1", key)
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


def test_missing_key_and_key_only_row() -> None:
    """The key field is neither a column nor an extra: the C parser tracks it apart from the columns."""
    for value, expected in [
        (b'{"relation":"int","row":{"v":1},"delta":1}', rejected("missing-key")),
        (b'{"relation":"u","row":{"k":"a","a":1},"delta":1}', rejected("missing-column")),
        (
            b'{"relation":"u","row":{"b":"x","k":"a","a":-5},"delta":1}',
            accepted("u", {"a": -5, "b": "x"}, 1, "a"),
        ),
        (b'{"relation":"u","row":{"a":1,"b":"x","k":"a","z":1},"delta":1}', rejected("unexpected-column")),
    ]:
        c, p, r = verdicts(TYPED, value)
        assert c == p == r == expected, value


CANONICAL = b'{"relation":"u","row":{"a":12,"b":"x y","k":"K"},"delta":-3}'
CANONICAL_OUTCOME = accepted("u", {"a": 12, "b": "x y"}, -3, "K")


def with_whitespace(ws: bytes) -> bytes:
    """CANONICAL with ``ws`` around every token (but not inside strings)."""
    parts = re.split(rb'("(?:[^"\\]|\\.)*")', CANONICAL)  # odd indexes: the strings
    out = [
        part if i % 2 else re.sub(rb"([{}\[\]:,])", lambda m: ws + m[1] + ws, part)
        for i, part in enumerate(parts)
    ]
    return ws + ws.join(out) + ws


@pytest.mark.parametrize("ws", [b" ", b"\t", b"\n", b"\r", b"\r\n", b" \t\n\r  "])
def test_whitespace_everywhere(ws: bytes) -> None:
    """JSON whitespace between any two tokens changes nothing, and the C parser skips it itself."""
    value = with_whitespace(ws)
    assert value.count(ws) >= 10 and orjson.loads(value) == orjson.loads(CANONICAL)
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == CANONICAL_OUTCOME, value
    recorder = Recorder(codecs(TYPED)[1])
    codec_module._compiled_decoder(TYPED, recorder).decode_grouped([value])
    assert recorder.declined == []


@pytest.mark.parametrize("ws", [b"\x0b", b"\x0c", b"\xc2\xa0", b"\x00"])
def test_non_json_whitespace_is_malformed(ws: bytes) -> None:
    """Vertical tab, form feed, NBSP and NUL are not JSON whitespace anywhere."""
    for value in (ws + CANONICAL, CANONICAL + ws, CANONICAL.replace(b":12", b":" + ws + b"12")):
        c, p, r = verdicts(TYPED, value)
        assert c == p == r == rejected("malformed-json"), value


@pytest.mark.parametrize(
    "value",
    [
        CANONICAL + b"x",
        CANONICAL + b"}",
        CANONICAL + b",",
        CANONICAL + b" {}",
        CANONICAL + b"1",
        CANONICAL + CANONICAL,
        CANONICAL.replace(b',"k":"K"}', b',"k":"K",}'),  # trailing comma in the row
        CANONICAL.replace(b"-3}", b"-3,}"),  # trailing comma in the event
        CANONICAL.replace(b"{", b"{,", 1),
        CANONICAL.replace(b'"a":12', b'"a"12'),
        CANONICAL.replace(b'"a":12', b'"a"::12'),
        CANONICAL.replace(b'"a":12', b"a:12"),
        CANONICAL.replace(b'"a":12', b"'a':12"),
        CANONICAL[:-1],
        CANONICAL[:-2] + b"}",
    ],
)
def test_malformed_records_are_rejected(value: bytes) -> None:
    """Trailing garbage, trailing commas and broken syntax: the C parser must not stop early and accept."""
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == rejected("malformed-json"), value


def test_trailing_whitespace_is_fine() -> None:
    """Only whitespace may follow the object (Kafka producers often end records with a newline)."""
    c, p, r = verdicts(TYPED, CANONICAL + b" \n\t\r")
    assert c == p == r == CANONICAL_OUTCOME


@pytest.mark.parametrize(
    "value",
    [
        CANONICAL.replace(b'"u"', b'"\\u0075"'),  # the relation name escaped
        CANONICAL.replace(b'"relation"', b'"\\u0072elation"'),  # a member name escaped
        CANONICAL.replace(b'"a":', b'"\\u0061":'),  # a column name escaped
        CANONICAL.replace(b'"k":', b'"\\u006b":'),  # the key field's name escaped
        CANONICAL.replace(b'"K"', b'"\\u004b"'),  # the key escaped
        CANONICAL.replace(b'"x y"', b'"x\\u0020y"'),
    ],
)
def test_escapes_decode_like_plain_text(value: bytes) -> None:
    """An escaped name or value is declined by C and then accepted by the fallback with the same result."""
    c, p, r = verdicts(TYPED, value)
    assert c == p == r == CANONICAL_OUTCOME, value


@pytest.mark.parametrize("escaped", ['"\\u00e7"', '"\\u00E7"', '"ç"'])
def test_non_ascii_relation_and_column_names(escaped: str) -> None:
    """A non-ASCII relation or column name matches as UTF-8 bytes, escaped (json.dumps' default) or not."""
    value = ('{"relation":' + escaped + ',"row":{"\\u00f1":2,"k":"K"},"delta":1}').encode()
    c, p, r = verdicts(KEYED, value)
    assert c == p == r == accepted("ç", {"ñ": 2.0}, 1, "K"), value
    # json.dumps escapes non-ASCII by default, orjson writes UTF-8: the same event either way
    doc = {"relation": "é", "row": {"ü": 5, "s": "ça"}, "delta": 1}
    for text in (json.dumps(doc).encode(), orjson.dumps(doc), json.dumps(doc, ensure_ascii=False).encode()):
        c, p, r = verdicts(PLAIN, text)
        assert c == p == r == accepted("é", {"ü": 5, "s": "ça"}), text
    # a decomposed ç (c + combining cedilla) is another name
    c, p, r = verdicts(KEYED, value.replace(escaped.encode(), '"c\u0327"'.encode()))
    assert c == p == r == rejected("unknown-relation")


def members(*parts: bytes) -> bytes:
    return b"{" + b",".join(parts) + b"}"


REL = b'"relation":"u"'
ROW = b'"row":{"a":1,"b":"","k":"K"}'
ONE = b'"delta":1'
ROW_OUTCOME = accepted("u", {"a": 1, "b": ""}, 1, "K")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (members(ROW, REL, ONE), ROW_OUTCOME),
        (members(ONE, b'"row":{"b":"","k":"K","a":1}', REL), ROW_OUTCOME),
        (members(b'"delta":2', REL, ROW), accepted("u", {"a": 1, "b": ""}, 2, "K")),
        # duplicates: the last one wins
        (members(b'"relation":"int"', REL, ROW, ONE), ROW_OUTCOME),
        (members(REL, ROW, b'"relation":"int"', ONE), rejected("missing-column")),
        (members(REL, ROW, ONE, b'"delta":0'), rejected("zero-delta")),
        (members(REL, ROW, b'"delta":0', b'"delta":5'), accepted("u", {"a": 1, "b": ""}, 5, "K")),
        (members(REL, ROW, b'"row":{"a":2,"b":"","k":"L"}', ONE), accepted("u", {"a": 2, "b": ""}, 1, "L")),
        (members(REL, b'"row":{"a":"x","a":1,"b":"","k":"K"}', ONE), ROW_OUTCOME),
        (members(REL, b'"row":{"a":1,"a":"x","b":"","k":"K"}', ONE), rejected("wrong-type")),
        (members(REL, b'"row":{"a":1,"b":"","k":"K","k":7}', ONE), accepted("u", {"a": 1, "b": ""}, 1, "7")),
        (members(REL, b'"row":{"a":1,"b":"","k":"K","k":null}', ONE), rejected("wrong-type")),
        # members missing, unknown or of the wrong type
        (members(REL, ROW), rejected("missing-field")),
        (members(REL, ROW, ONE, b'"ts":1'), rejected("unknown-field")),
        (members(REL, b'"row":[]', ONE), rejected("not-an-object")),
        (members(b'"relation":"e"', ROW, ONE), rejected("unknown-relation")),
        (members(b'"relation":null', ROW, ONE), rejected("unknown-relation")),
        (members(REL, ROW, b'"delta":true'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":1.0'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":"1"'), rejected("bad-delta")),
        (members(REL, ROW, b'"delta":-0'), rejected("zero-delta")),
        (members(REL, ROW, b'"delta":99999999999999999999'), rejected("integer-out-of-range")),
        (members(REL, ROW, b'"delta":-9223372036854775809'), rejected("integer-out-of-range")),
        (members(REL, ROW, b'"delta":-9223372036854775808'), accepted("u", {"a": 1, "b": ""}, -(2**63), "K")),
        (
            members(REL, ROW, b'"delta":18446744073709551615'),
            accepted("u", {"a": 1, "b": ""}, 2**64 - 1, "K"),
        ),
        (members(REL, ROW, b'"delta":999999999999999999'), accepted("u", {"a": 1, "b": ""}, 10**18 - 1, "K")),
    ],
)
def test_member_order_duplicates_and_shape(value: bytes, expected: Outcome) -> None:
    """Member order is free and a repeated name takes its last value (as orjson does); C declines both
    a row before its relation and any repeated name, so the fallback must get them right."""
    c, p, r = verdicts(TYPED, value)
    assert r == expected, value
    assert c == r, value
    assert p == r, value


@pytest.mark.parametrize(
    "value",
    [
        b'{"row":{"qty":1,"px":2,"sym":"x","cl\xc3\xa9":"a"},"delta":1}',
        b'{"delta":1,"row":{"qty":1,"px":2,"sym":"x","cl\xc3\xa9":"a"}}',
        b'{"row":{"qty":1,"px":2,"sym":"x","cl\\u00e9":"a"},"delta":1}',
    ],
)
def test_single_relation_schema_still_requires_the_relation_member(value: bytes) -> None:
    """With one relation there is nothing to choose, but a record without "relation" is still malformed."""
    c, p, r = verdicts(KEYED_UNICODE, value)
    assert r == rejected("missing-field")
    assert c == r, value
    assert p == r, value


def test_zero_column_relation() -> None:
    """A relation without columns: only ``{}`` (plus the key) is a valid row."""
    for schema, row, expected in [
        (PLAIN, b"{}", accepted("e", {})),
        (PLAIN, b" { } ", accepted("e", {})),
        (PLAIN, b'{"i":1}', rejected("unexpected-column")),
        (KEYED, b'{"k":"z"}', accepted("e", {}, 1, "z")),
        (KEYED, b"{}", rejected("missing-key")),
        (KEYED, b'{"k":"z","k":"y"}', accepted("e", {}, 1, "y")),
    ]:
        value = b'{"relation":"e","row":' + row + b',"delta":1}'
        c, p, r = verdicts(schema, value)
        assert c == p == r == expected, (value, schema.key_field)


def test_wide_relations_at_the_column_limit() -> None:
    """62 columns (plus the key) fit the C decoder's bit mask; 63 are declined; both decode correctly."""
    for width in (61, 62, 63, 64):
        rel = Relation("w", tuple((f"c{j}", "int") for j in range(width)))
        schema = Schema.of(rel, key_field="k")
        compiled = EventCodec(schema, compiled=True)
        row = {f"c{j}": j for j in range(width)}
        for value in (
            orjson.dumps({"relation": "w", "row": {**row, "k": "x"}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {"k": "x", **dict(reversed(row.items()))}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row, "c0": True, "k": "x"}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row}, "delta": 1}),
            orjson.dumps({"relation": "w", "row": {**row, "k": "x", "c999": 1}, "delta": 1}),
        ):
            [item] = compiled.decode_many([value])
            assert outcome(item) == reference(compiled, value), (width, value)
        canonical = orjson.dumps({"relation": "w", "row": {**row, "k": "x"}, "delta": 1})
        [item] = compiled.decode_many([canonical])
        assert outcome(item) == accepted("w", row, 1, "x")
        recorder = Recorder(compiled)
        codec_module._compiled_decoder(schema, recorder).decode_grouped([canonical])
        assert recorder.declined == ([] if width <= 62 else [canonical]), width
