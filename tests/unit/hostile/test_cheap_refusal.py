"""The compiled decoder's refusal scan: cheap for hostile records, and never a different verdict.

A record the compiled decoder declines is scanned without building objects (shared/events/_fastjson.c):
over the size limit, nested too deep or holding an integer beyond 64 bits, its error is made in C, and so
is a null or a scalar of the wrong JSON type in a column of an otherwise valid record; not JSON, not
UTF-8, holding a NaN or another certainly invalid value, it goes straight to the reference decoder. Both
must give the
reference decoder's reason *and* detail (the detail is in every dead letter), which is checked here on
hostile records and on random damage to good ones; and the hostile kinds must really skip the slower
paths, which is what the scan is for.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.hostile_records import KINDS, hostile_record
from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from ivmstream.events import codec as codec_module
from ivmstream.events.reasons import MAX_NESTING
from tests.unit.extension_checks import require_built

require_built(
    codec_module._fastjson,
    "event decoder",
    "ivmstream.events._fastjson",
    "shared/events/_fastjson*.c",
)

# Two relations the C decoder parses in full (one with a decimal column), and a key.
PARSED = Relation.of("p", i="int", f="float", s="str", b="bool", e="exact")
WITH_DECIMAL = Relation.of("d", s="str", d="decimal", n="number")
SCHEMA = Schema.of(PARSED, WITH_DECIMAL, key_field="k")
LIMIT = 600
GOOD: list[dict[str, Any]] = [
    {"relation": "p", "row": {"i": 7, "f": 1.5, "s": "ab", "b": True, "e": 3, "k": "x"}, "delta": 1},
    {"relation": "d", "row": {"s": "é", "d": "2.50", "n": -4, "k": 12}, "delta": -2},
]


def verdict(item: UpdateEvent | EventError) -> tuple[Any, ...]:
    if isinstance(item, EventError):
        return ("rejected", item.code, item.detail)
    return ("accepted", item.relation, tuple((c, type(v).__name__, repr(v)) for c, v in item.row.items()))


def reference(codec: EventCodec, value: bytes) -> tuple[Any, ...]:
    try:
        return verdict(codec.decode_slow(value))
    except EventError as err:
        return verdict(err)


def check_agrees(values: list[bytes]) -> None:
    codec = EventCodec(SCHEMA, compiled=True, max_record_bytes=LIMIT)
    expected = [reference(codec, v) for v in values]
    assert [verdict(x) for x in codec.decode_many(values)] == expected
    decoded, _, errors = codec.decode_grouped(values)
    assert [verdict(x) for x in decoded] == expected
    assert errors == sum(e[0] == "rejected" for e in expected)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(KINDS), st.sampled_from(GOOD))
def test_hostile_records_get_the_reference_reason_and_detail(
    seed: int, kind: str, event: dict[str, Any]
) -> None:
    value, reason = hostile_record(
        kind, event, SCHEMA.relations[event["relation"]], random.Random(seed), LIMIT
    )
    check_agrees([value])
    [item] = EventCodec(SCHEMA, compiled=True, max_record_bytes=LIMIT).decode_many([value])
    # fuzz/hostile_records.py's wrong values for a bool column include a null, which is a null-value
    expected = {reason, "null-value"} if kind == "wrong-type" else {reason}
    assert isinstance(item, EventError) and item.code in expected


# Damage that reaches every branch of the scan: brackets and quotes (nesting read outside strings, strings
# left open), escapes (surrogates), numbers at and past the 64-bit bounds, long and overflowing floats,
# bytes that are not UTF-8, nulls, NaN, truncation.
PIECES = [
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b"\\",
    b",",
    b":",
    b" ",
    b"\n",
    b"null",
    b"NaN",
    b"-Infinity",
    b"true",
    b"0",
    b"-",
    b"1e999",
    b"1e-999",
    b"2.5",
    b"\\ud800",
    b"\\udc00",
    b'"\\ud83d\\ude00"',
    b"\xff",
    b"\xed\xa0\x80",
    b"\xc3\xa9",
    b"18446744073709551615",
    b"18446744073709551616",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"1" * 45,
    b"-" + b"9" * 320,
    b"0." + b"1" * 70,
    b"[" * 20 + b"]" * 20,
    b'"[[[[[[[[[[[[[[[[[["',
    b"x" * 40,
]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    value = bytearray(orjson.dumps(draw(st.sampled_from(GOOD))))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(value)))
        cut = draw(st.integers(0, 3))
        value[at : at + cut] = draw(st.sampled_from(PIECES))
    if draw(st.booleans()):
        value = value[: draw(st.integers(0, len(value)))]
    return bytes(value)


@settings(max_examples=400, deadline=None)
@given(st.lists(damaged(), min_size=1, max_size=6))
def test_damaged_records_get_the_reference_verdict_and_detail(values: list[bytes]) -> None:
    check_agrees(values)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("event", GOOD, ids=lambda e: e["relation"])
@pytest.mark.parametrize("seed", range(3))
def test_hostile_kinds_are_refused_in_c(kind: str, event: dict[str, Any], seed: int) -> None:
    """Every kind of hostile record is refused by the compiled decoder itself: neither the fast Python
    path nor the reference decoder runs (text that is not JSON gets its detail from the JSON parser's own
    error, called from C), and the verdict is still the reference decoder's."""
    value, _ = hostile_record(
        kind, event, SCHEMA.relations[event["relation"]], random.Random(f"{kind}{seed}"), LIMIT
    )
    calls: list[bytes] = []
    decoder = codec_module._compiled_decoder(SCHEMA, calls.append, LIMIT, calls.append)
    [item] = decoder.decode_many([value])
    assert calls == [] and isinstance(item, EventError)
    assert verdict(item) == reference(EventCodec(SCHEMA, compiled=False, max_record_bytes=LIMIT), value)


def in_column(event: dict[str, Any], column: str, raw: str) -> bytes:
    """``event`` as JSON with ``column`` of its row holding the JSON text ``raw`` verbatim."""
    spliced = dict(event, row=dict(event["row"], **{column: "\x00SPLICE"}))
    return orjson.dumps(spliced).replace(b'"\\u0000SPLICE"', raw.encode())


def refused_in_c(value: bytes) -> bool:
    calls: list[bytes] = []
    decoder = codec_module._compiled_decoder(SCHEMA, calls.append, LIMIT, calls.append)
    decoder.decode_many([value])
    return not calls


# Arrays and objects in a column: shown by kind and size, unless something the reference decoder checks
# first is wrong inside them (not JSON, NaN, a 64-bit overflow, too deep) or an object's names may repeat.
CONTAINERS = [
    "[]",
    "[1]",
    '[1, "a", null, true, {"b": []}]',
    "{}",
    '{"a": 1}',
    '{"a": 1, "b": 2}',
    '{"a": 1, "a": 2}',
    "[[[[1]]]]",
    "[" * 14 + "]" * 14,
    "[" * 15 + "]" * 15,
    "[NaN]",
    "[18446744073709551616]",
    '["\\ud800"]',
    "[1e999]",
    "[1,]",
    "[1 2]",
    '{"a" 1}',
    '["\xc3\xa9"]',
]


@pytest.mark.parametrize("raw", CONTAINERS)
@pytest.mark.parametrize("column", ["i", "f", "s", "b", "e"])
def test_a_container_in_a_column_gets_the_reference_verdict(raw: str, column: str) -> None:
    value = in_column(GOOD[0], column, raw)
    check_agrees([value])
    if raw in ("[]", "[1]", "{}", '{"a": 1}', "[[[[1]]]]") or raw.startswith("[1, "):
        assert refused_in_c(value)


@pytest.mark.parametrize("first", ["[1]", "null", '"x"', "{}"])
@pytest.mark.parametrize("second", ["[2, 3]", "null", "2.5", "{}"])
def test_the_first_bad_column_in_schema_order_is_the_verdict(first: str, second: str) -> None:
    """i comes before s in the schema, wherever they are in the text."""
    row = dict(GOOD[0]["row"], i="\x00I", s="\x00S")
    in_order = orjson.dumps(dict(GOOD[0], row=row))
    s_first = orjson.dumps(dict(GOOD[0], row={"s": row.pop("s"), **row}))
    values = [
        v.replace(b'"\\u0000I"', first.encode()).replace(b'"\\u0000S"', second.encode())
        for v in (in_order, s_first)
    ]
    assert all(b"\\u0000" not in v for v in values)
    check_agrees(values)


# Strings in a decimal or exact column that are not numbers: Decimal() refuses those without a digit,
# except the infinities and NaNs it reads (then not finite), every spelling of which has an n.
NOT_DECIMAL = ["abc", "x", "", " ", ".", "+", "-", "e", "E5", "_", "NaN", "-inf", "sNaN12", "Infinity", "nan"]


@pytest.mark.parametrize("text", NOT_DECIMAL)
def test_a_string_that_is_not_a_decimal_gets_the_reference_verdict(text: str) -> None:
    in_decimal = in_column(GOOD[1], "d", orjson.dumps(text).decode())
    in_exact = in_column(GOOD[0], "e", orjson.dumps(text).decode())
    check_agrees([in_decimal, in_exact])
    if "n" not in text.lower() and not any(ch.isdigit() for ch in text):
        assert refused_in_c(in_decimal) and refused_in_c(in_exact)


@pytest.mark.parametrize("event", GOOD, ids=lambda e: e["relation"])
def test_every_truncation_gets_the_json_parsers_reason_and_detail(event: dict[str, Any]) -> None:
    """Cut anywhere (in a name, a number, a literal, a multi-byte character): the detail quotes the JSON
    parser's message, at a position counted in characters when the text is not ASCII."""
    value = orjson.dumps(event)
    check_agrees([value[:i] for i in range(len(value))])


NOT_JSON = [
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "+1",
    "1e999",
    "-1e999",
    "1" * 400,
    "nan",
    "tru",
    "01",
    "1.",
    "'a'",
]


@pytest.mark.parametrize("literal", NOT_JSON)
@pytest.mark.parametrize("where", ["delta", "column", "after-text"])
def test_values_that_are_not_json_get_the_json_parsers_reason_and_detail(literal: str, where: str) -> None:
    event = GOOD[1]  # its text holds an é: character and byte positions differ after it
    if where == "delta":
        value = orjson.dumps(dict(event, delta=0)).replace(b'"delta":0', b'"delta":' + literal.encode())
    elif where == "column":
        value = in_column(event, "n", literal)
    else:
        value = in_column(dict(event, row=dict(event["row"], s="é" * 3)), "n", literal)
    check_agrees([value, value + b" ", b" \n" + value])
    if len(literal) < 300:
        assert refused_in_c(value)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udc00", "\\uDFFF", "\\ud83d\\ude00"])
@pytest.mark.parametrize("damage", ["18446744073709551616", "NaN", "1e999", "[1]"])
def test_an_escaped_surrogate_before_other_damage_is_the_json_parsers_call(escape: str, damage: str) -> None:
    """A lone surrogate, high or low, is refused by the JSON parser before the damage after it."""
    event = dict(GOOD[0], row=dict(GOOD[0]["row"], s="\x00S"))
    value = orjson.dumps(event).replace(b'"\\u0000S"', f'"{escape}"'.encode())
    value = value.replace(b'"delta":1', b'"delta":' + damage.encode())
    check_agrees([value, value.replace(b'"i":7', b'"i":' + damage.encode())])


def test_errors_made_in_c_are_what_the_python_class_makes() -> None:
    """The compiled decoder builds EventErrors without running their __init__."""
    values = [
        hostile_record(kind, GOOD[1], SCHEMA.relations["d"], random.Random(kind), LIMIT)[0] for kind in KINDS
    ]
    calls: list[bytes] = []
    decoder = codec_module._compiled_decoder(SCHEMA, calls.append, LIMIT, calls.append)
    made = decoder.decode_many(values)
    assert calls == [] and len(made) == len(KINDS)
    for err in made:
        assert isinstance(err, EventError)
        twin = EventError(err.code, err.detail)
        assert type(err) is EventError and err.args == twin.args and str(err) == str(twin)
        assert vars(err) == vars(twin) and err.__traceback__ is None


class PlainError(ValueError):
    """An error type without slots: the compiled decoder sets its attributes by name."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


def test_an_error_type_without_slots_gets_the_same_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [
        hostile_record(kind, GOOD[1], SCHEMA.relations["d"], random.Random(kind), LIMIT)[0] for kind in KINDS
    ] * 2  # twice: the second refusal of a kind reuses what the first made
    expected = codec_module._compiled_decoder(SCHEMA, [].append, LIMIT, None).decode_many(values)
    monkeypatch.setattr(codec_module, "EventError", PlainError)
    calls: list[bytes] = []
    made = codec_module._compiled_decoder(SCHEMA, calls.append, LIMIT, calls.append).decode_many(values)
    assert calls == [] and len(made) == len(values)
    for err, twin in zip(made, expected, strict=True):
        assert type(err) is PlainError and err.args == twin.args
        assert (err.code, err.detail) == (twin.code, twin.detail)


NOT_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe2\x82", b"\x80"]


@settings(max_examples=200, deadline=None)
@given(damaged(), st.sampled_from(NOT_UTF8), st.floats(0, 1))
def test_text_that_is_not_utf8_is_refused_in_c_with_the_reference_detail(
    value: bytes, bad: bytes, where: float
) -> None:
    """Wherever the bad bytes are, and whatever other damage the text has: the reference parser checks
    the encoding first, with one message, so its detail is made in C (after the size and depth checks;
    the depth of a text with a string left open is the reference decoder's call)."""
    at = int(where * len(value))
    value = value[:at] + bad + value[at:]
    check_agrees([value])
    codec = EventCodec(SCHEMA, compiled=False, max_record_bytes=LIMIT)
    calls: list[bytes] = []
    decoder = codec_module._compiled_decoder(SCHEMA, calls.append, LIMIT, calls.append)
    [item] = decoder.decode_many([value])
    shallow = value.count(b"[") + value.count(b"{") <= MAX_NESTING  # else the depth check may be undecided
    if reference(codec, value)[1] == "invalid-utf8" and shallow:
        assert calls == [] and verdict(item) == reference(codec, value)


@pytest.mark.parametrize(
    "literal",
    [
        "18446744073709551616",  # 2**64, the first positive integer out of range
        "-9223372036854775809",  # -2**63 - 1
        "9" * 40,
        "-" + "9" * 39,  # 40 characters with the sign: quoted whole
        "9" * 41,  # abbreviated
        "-" + "1" * 45,
        "7" * 300,  # the longest literal the scan judges
        "7" * 301,  # longer: the reference decoder judges
    ],
)
@pytest.mark.parametrize("where", ["delta", "column", "after-text"])
def test_integers_beyond_64_bits_are_quoted_as_the_reference_decoder_quotes_them(
    literal: str, where: str
) -> None:
    event = dict(GOOD[1])
    if where == "delta":
        value = orjson.dumps(dict(event, delta=0)).replace(b'"delta":0', b'"delta":' + literal.encode())
    else:
        text = "12345678901234567890123 é" if where == "after-text" else "x"
        row = dict(event["row"], s=text, n="\x00N")
        value = orjson.dumps(dict(event, row=row)).replace(b'"\\u0000N"', literal.encode())
    check_agrees([value])
    [item] = EventCodec(SCHEMA, compiled=True, max_record_bytes=1 << 16).decode_many([value])
    assert isinstance(item, EventError) and item.code == "integer-out-of-range"
