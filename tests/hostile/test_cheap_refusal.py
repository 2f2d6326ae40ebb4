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
from shared.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from shared.events import codec as codec_module
from shared.events.reasons import MAX_NESTING

if codec_module._fastjson is None:  # never skipped: the compiled decoder is what is tested
    pytest.fail("shared.events._fastjson is not built: run `make setup` or `pip install -e .`", pytrace=False)

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
def test_hostile_kinds_skip_the_slower_paths(kind: str, event: dict[str, Any]) -> None:
    """Oversized, too deep, 64-bit overflows, text that is not UTF-8, nulls and scalars of the wrong kind
    in a column are refused in C; every other kind (not JSON, NaN, a container or a string in a decimal
    column) goes to the reference decoder without the fast Python path."""
    value, _ = hostile_record(kind, event, SCHEMA.relations[event["relation"]], random.Random(kind), LIMIT)
    calls: dict[str, int] = {"fallback": 0, "refuse": 0}
    codec = EventCodec(SCHEMA, compiled=False, max_record_bytes=LIMIT)

    def called(path: str) -> Any:
        def call(v: bytes) -> UpdateEvent | EventError:
            calls[path] += 1
            return codec._refuse(v)

        return call

    decoder = codec_module._compiled_decoder(SCHEMA, called("fallback"), LIMIT, called("refuse"))
    [item] = decoder.decode_many([value])
    assert isinstance(item, EventError)
    if kind in ("oversized", "too-deep", "integer-out-of-range", "null-value", "invalid-utf8"):
        assert calls == {"fallback": 0, "refuse": 0}
    elif kind == "wrong-type":  # by the value drawn: a scalar in C, a container by the reference
        assert calls["fallback"] == 0 and calls["refuse"] <= 1
    else:
        assert calls == {"fallback": 0, "refuse": 1}


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


class _Msg:
    """The parts of a consumed record a dead letter reads."""

    def __init__(self, offset: int, value: bytes) -> None:
        self._offset, self._value = offset, value

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return b"k"


class _Producer:
    """Refuses the produces listed in ``refuse`` (by call number) with the given exception, once each."""

    def __init__(self, refuse: dict[int, BaseException]) -> None:
        self.refuse, self.calls, self.sent = refuse, 0, []  # type: ignore[var-annotated]

    def produce(self, topic: str, value: bytes, key: bytes, **kw: Any) -> None:
        self.calls += 1
        exc = self.refuse.pop(self.calls, None)
        if exc is not None:
            raise exc
        self.sent.append((topic, value, key, dict(kw["headers"])))

    def poll(self, _timeout: float) -> int:
        return 0


def test_a_batch_of_dead_letters_keeps_every_header_and_the_refusal_handling() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from shared.runtime.output import DeliveryFailed, Output

    producer = _Producer({2: BufferError("queue full")})
    out = Output("svc", producer, "out", "dlq", None)  # type: ignore[arg-type]
    refused = [(_Msg(i, b"v%d" % i), ("oversized", "null-value")[i % 2], f"detail {i}") for i in range(4)]
    out.dead_letters(refused)  # type: ignore[arg-type]
    assert [(t, v, k) for t, v, k, _ in producer.sent] == [("dlq", b"v%d" % i, b"k") for i in range(4)]
    for (_, _, _, headers), (msg, code, detail) in zip(producer.sent, refused, strict=True):
        assert headers == {
            "ivmstream.reason": code.encode(),
            "ivmstream.detail": detail.encode(),
            "ivmstream.service": b"svc",
            "ivmstream.source": f"in:2:{msg.offset()}".encode(),
        }
    gone = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    producer = _Producer({1: gone, 2: gone})
    with pytest.raises(DeliveryFailed, match="cannot publish to dlq"):
        Output("svc", producer, "out", "dlq", None).dead_letters(refused)  # type: ignore[arg-type]
