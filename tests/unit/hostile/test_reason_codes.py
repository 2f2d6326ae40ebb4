"""Each kind of hostile record is refused with its own stable reason, by every decoder.

The compiled decoder (C), the msgspec fast path and the reference decoder must agree: a record is
checked through ``decode_many`` and ``decode_grouped`` of a codec with and without the compiled decoder,
and through ``decode_slow``. Records are built per case (not recorded outputs of the code under test).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from ivmstream.events import codec as codec_module
from ivmstream.events.reasons import INT_MAX, INT_MIN, MAX_NESTING, REASONS, out_of_range_integer, too_deep
from tests.unit.extension_checks import require_built

require_built(
    codec_module._fastjson,
    "event decoder",
    "ivmstream.events._fastjson",
    "shared/events/_fastjson*.c",
)

# One column of every type, and a key field, so that every column type meets every hostile value.
ALL_TYPES = Relation.of("t", i="int", f="float", n="number", s="str", b="bool", d="decimal", e="exact")
SCHEMA = Schema.of(ALL_TYPES, Relation.of("u", i="int"), key_field="k")
GOOD_ROW: dict[str, Any] = {"i": 1, "f": 1.5, "n": 2, "s": "x", "b": True, "d": "1.25", "e": 3, "k": "key"}
LIMIT = 1 << 16


def codecs() -> list[EventCodec]:
    return [
        EventCodec(SCHEMA, compiled=True, max_record_bytes=LIMIT),
        EventCodec(SCHEMA, compiled=False, max_record_bytes=LIMIT),
    ]


def verdicts(value: bytes) -> list[str]:
    """The reason code (or "accepted") every decoding path gives ``value``."""
    out = []
    for codec in codecs():
        [many] = codec.decode_many([value])
        decoded, _, errors = codec.decode_grouped([value])
        for item in (many, decoded[0]):
            out.append(item.code if isinstance(item, EventError) else "accepted")
        assert errors == (1 if isinstance(decoded[0], EventError) else 0)
        try:
            codec.decode_slow(value)
            out.append("accepted")
        except EventError as err:
            assert err.code in REASONS, err.code
            out.append(err.code)
    return out


def event(row: dict[str, Any], relation: str = "t", delta: Any = 1) -> dict[str, Any]:
    return {"relation": relation, "row": row, "delta": delta}


def with_column(col: str, raw_value: str) -> bytes:
    """A good record whose column ``col`` holds the JSON text ``raw_value`` verbatim."""
    row = dict(GOOD_ROW)
    row[col] = "\x00PLACEHOLDER"
    text = orjson.dumps(event(row)).decode()
    return text.replace('"\\u0000PLACEHOLDER"', raw_value).encode()


def assert_reason(value: bytes, code: str) -> None:
    assert set(verdicts(value)) == {code}, (value[:80], verdicts(value))


def test_the_good_record_is_accepted_by_every_path() -> None:
    assert set(verdicts(orjson.dumps(event(GOOD_ROW)))) == {"accepted"}


@pytest.mark.parametrize("size", [LIMIT + 1, 10 * LIMIT])
def test_oversized(size: int) -> None:
    row = dict(GOOD_ROW, s="")
    base = len(orjson.dumps(event(row)))
    row["s"] = "a" * (size - base)
    value = orjson.dumps(event(row))
    assert len(value) == size
    assert_reason(value, "oversized")
    row["s"] = "a" * (LIMIT - base)  # exactly at the limit: accepted
    assert set(verdicts(orjson.dumps(event(row)))) == {"accepted"}


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 500, 990, 1010, 1024, 2000])
@pytest.mark.parametrize("col", ["i", "s", "k"])
def test_deeply_nested(depth: int, col: str) -> None:
    assert_reason(with_column(col, "[" * depth + "]" * depth), "too-deep")


def test_nesting_up_to_the_limit_is_a_type_error_not_too_deep() -> None:
    assert_reason(with_column("i", "[" * (MAX_NESTING - 2) + "]" * (MAX_NESTING - 2)), "wrong-type")


@pytest.mark.parametrize("depth", [1000, 1020])
def test_nesting_past_the_recursion_limit_as_relation_or_delta(depth: int) -> None:
    """Refusals quote the offending value: never by a repr that would overflow the stack."""
    nested = "[" * depth + "]" * depth
    good = orjson.dumps(event(GOOD_ROW))
    assert_reason(good.replace(b'"relation":"t"', b'"relation":' + nested.encode()), "too-deep")
    assert_reason(good.replace(b'"delta":1', b'"delta":' + nested.encode()), "too-deep")


def test_deep_nesting_beyond_the_parser_in_an_unknown_field() -> None:
    value = b'{"relation":"t","row":{},"delta":1,"x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert_reason(value, "too-deep")


HUGE = [str(INT_MAX + 1), str(INT_MIN - 1), str(2**65), "9" * 40, "-" + "9" * 400]


@pytest.mark.parametrize("literal", HUGE)
@pytest.mark.parametrize("col", ["i", "f", "n", "d", "e", "k"])
def test_huge_integer_in_every_column(literal: str, col: str) -> None:
    assert_reason(with_column(col, literal), "integer-out-of-range")


@pytest.mark.parametrize("literal", HUGE)
def test_huge_integer_delta(literal: str) -> None:
    value = orjson.dumps(event(GOOD_ROW)).replace(b'"delta":1', b'"delta":' + literal.encode())
    assert_reason(value, "integer-out-of-range")


@pytest.mark.parametrize("literal", [str(INT_MAX), str(INT_MIN), str(2**63), "123456789012345678"])
def test_integers_at_the_int64_bounds_are_accepted(literal: str) -> None:
    for col in ("i", "n", "e"):
        assert set(verdicts(with_column(col, literal))) == {"accepted"}


def test_long_digit_runs_inside_strings_are_not_integers() -> None:
    assert set(verdicts(with_column("s", '"' + "7" * 60 + '"'))) == {"accepted"}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
@pytest.mark.parametrize("col", ["i", "f", "n", "d", "e", "k"])
def test_non_finite_numbers(literal: str, col: str) -> None:
    assert_reason(with_column(col, literal), "non-finite-number")


def test_non_finite_delta() -> None:
    assert_reason(orjson.dumps(event(GOOD_ROW)).replace(b'"delta":1', b'"delta":NaN'), "non-finite-number")


INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\x80"]


@pytest.mark.parametrize("bad", INVALID_UTF8)
@pytest.mark.parametrize("where", ["s", "k", "relation", "name"])
def test_invalid_utf8(bad: bytes, where: str) -> None:
    good = orjson.dumps(event(GOOD_ROW))
    if where == "relation":
        value = good.replace(b'"relation":"t"', b'"relation":"t' + bad + b'"')
    elif where == "name":
        value = good.replace(b'"i":1', b'"i' + bad + b'":1')
    else:
        value = with_column(where, '"\x00"').replace(b"\x00", bad)
    assert_reason(value, "invalid-utf8")


def test_escaped_lone_surrogate_is_invalid_utf8() -> None:
    assert_reason(with_column("s", '"\\ud800"'), "invalid-utf8")


# Values of every JSON type that no column of the given type accepts.
WRONG: dict[str, list[str]] = {
    "i": ['"1"', "1.0", "true", "[]", "{}", "1e3"],
    "f": ['"1.5"', "true", "[1]", "{}"],
    "n": ['"2"', "false", "[]", '{"a":1}'],
    "s": ["1", "1.5", "true", "[]", "{}"],
    "b": ["1", "0", '"true"', "[]", "{}", "1.0"],
    "d": ["true", "[]", "{}", '"abc"', '"NaN"', '"Infinity"'],
    "e": ["true", "[]", "{}", '"x"', '"-Infinity"'],
    "k": ["1.5", "true", "[]", "{}"],
}


@pytest.mark.parametrize(("col", "raw"), [(c, r) for c, values in WRONG.items() for r in values])
def test_wrong_type_in_every_column(col: str, raw: str) -> None:
    assert_reason(with_column(col, raw), "wrong-type")


@pytest.mark.parametrize("col", list(GOOD_ROW))
def test_null_in_every_column(col: str) -> None:
    assert_reason(with_column(col, "null"), "wrong-type" if col == "k" else "null-value")


STRUCTURAL: list[tuple[Callable[[], bytes], str]] = [
    (lambda: b"", "malformed-json"),
    (lambda: b"{", "malformed-json"),
    (lambda: b"[1]", "not-an-object"),
    (lambda: orjson.dumps({"relation": "t", "row": GOOD_ROW}), "missing-field"),
    (lambda: orjson.dumps({**event(GOOD_ROW), "x": 1}), "unknown-field"),
    (lambda: orjson.dumps(event(GOOD_ROW, relation="nope")), "unknown-relation"),
    (lambda: orjson.dumps(event(GOOD_ROW, delta=1.0)), "bad-delta"),
    (lambda: orjson.dumps(event(GOOD_ROW, delta=0)), "zero-delta"),
    (lambda: orjson.dumps(event({c: v for c, v in GOOD_ROW.items() if c != "k"})), "missing-key"),
    (lambda: orjson.dumps(event({c: v for c, v in GOOD_ROW.items() if c != "s"})), "missing-column"),
    (lambda: orjson.dumps(event({**GOOD_ROW, "z": 1})), "unexpected-column"),
    (lambda: orjson.dumps({"relation": "t", "row": [1], "delta": 1}), "not-an-object"),
]


@pytest.mark.parametrize(("make", "code"), STRUCTURAL, ids=[code for _, code in STRUCTURAL])
def test_structural_reasons(make: Callable[[], bytes], code: str) -> None:
    assert_reason(make(), code)


def test_every_reason_is_reached_by_a_case_here() -> None:
    """The catalogue holds no dead code: each reason has a record above that produces it."""
    reached = {code for _, code in STRUCTURAL} | {
        "oversized",
        "too-deep",
        "integer-out-of-range",
        "non-finite-number",
        "invalid-utf8",
        "wrong-type",
        "null-value",
    }
    assert reached == set(REASONS)


def test_empty_value_none_is_malformed() -> None:
    for codec in codecs():
        [item] = codec.decode_many([None])
        assert isinstance(item, EventError) and item.code == "malformed-json"


def test_mixed_batch_keeps_order_and_groups_only_good_records() -> None:
    good = [orjson.dumps(event(dict(GOOD_ROW, i=n, k=f"k{n % 3}"))) for n in range(30)]
    bad = [with_column("i", "NaN"), b"\xff", with_column("f", "9" * 30), b"[" * 3000]
    values = [v for pair in zip(good, bad * 8, strict=False) for v in pair]
    for codec in codecs():
        decoded, groups, errors = codec.decode_grouped(values)
        assert errors == len(values) // 2
        assert [type(d) for d in decoded[0::2]] == [UpdateEvent] * (len(values) // 2)
        assert sum(len(g) for g in groups.values()) == len(values) // 2


# --- the raw-text checks against their definitions (a parse of the text) ------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{}0123456789.e-\n'), max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=40,
)


def depth_of(obj: Any) -> int:
    """How deep ``obj`` nests: a scalar is 0, ``[]`` and ``{}`` are 1."""
    if isinstance(obj, dict):
        return 1 + max((depth_of(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((depth_of(v) for v in obj), default=0)
    return 0


def out_of_range_by_parsing(raw: bytes) -> bool:
    found = []

    def check(literal: str) -> int:
        if not INT_MIN <= int(literal) <= INT_MAX:
            found.append(literal)
        return int(literal)

    json.loads(raw, parse_int=check)
    return bool(found)


@given(JSON_VALUES, st.integers(0, 30), st.sampled_from([0, 2, 16, 17, 40]))
def test_too_deep_is_the_depth_of_the_parsed_value(value: Any, wrap: int, limit: int) -> None:
    raw = ("[" * wrap + json.dumps(value) + "]" * wrap).encode()
    assert too_deep(raw, limit) == (depth_of(json.loads(raw)) > limit)


@given(JSON_VALUES, st.sampled_from([" ", "", "\n"]))
def test_out_of_range_integer_is_what_a_parse_finds(value: Any, space: str) -> None:
    raw = json.dumps(value, separators=(",", ":" + space)).encode()
    assert (out_of_range_integer(raw) is not None) == out_of_range_by_parsing(raw)
