"""Decimal columns in the compiled decoder, and the records it sends straight to the reference decoder.

The C decoder makes a decimal (or a non-integer exact) value with ``Decimal()`` itself when the value is
an integer, a float (by its shortest repr) or a plain decimal string; anything else it declines, and the
reference decoder decides. A record it finds certainly invalid while parsing (a value of the wrong JSON
type, an unknown relation, column or field, a missing one, a zero delta) skips the msgspec path. Both
must leave every verdict the reference decoder's: checked here value by value against it.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema, UpdateEvent
from ivmstream.events import codec as codec_module
from tests.unit.extension_checks import require_built

require_built(
    codec_module._fastjson,
    "event decoder",
    "ivmstream.events._fastjson",
    "shared/events/_fastjson*.c",
)

SCHEMA = Schema.of(
    Relation.of("m", d="decimal", x="exact", i="int", s="str", b="bool", f="float"), key_field="k"
)
GOOD_ROW: dict[str, Any] = {"d": "1.5", "x": 2, "i": 3, "s": "a", "b": True, "f": 0.5, "k": "z"}
# Text Decimal() reads in ways a plain literal does not, or refuses: the reference decides these.
ODD_DECIMALS = (
    " 1.5",
    "1_000",
    "NaN",
    "-Infinity",
    "inf",
    "sNaN",
    "\u0661\u0662",
    "+.5",
    "5.",
    ".",
    "-",
    "e5",
    "1e",
    "1e+",
    "1e1234567890",
    "1e123456789",
    "0e0",
    "-0",
    "1.5 ",
    "",
    "abc",
    "0x10",
    "1,5",
    "\\u0031",
)
DECIMAL_TEXT = st.one_of(
    st.sampled_from(ODD_DECIMALS),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
    st.from_regex(r"[+-]?[0-9]{0,25}(\.[0-9]{0,25})?([eE][+-]?[0-9]{1,11})?", fullmatch=True),
    st.text(max_size=6),
)
# Raw JSON values for a column: every JSON kind, decimal-like strings, numbers at the parser's limits.
RAW_VALUES = st.one_of(
    DECIMAL_TEXT.map(lambda t: orjson.dumps(t).decode()),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(("true", "false", "null", "[]", "{}", "[1]", '{"a":1}', "1e400", "-0.0", "1E2", "NaN")),
)


def verdict(item: UpdateEvent | EventError) -> tuple[Any, ...]:
    if isinstance(item, EventError):
        return ("rejected", item.code, item.detail)
    row = tuple((c, type(v).__name__, repr(v)) for c, v in item.row.items())
    return ("accepted", item.relation, row, item.delta, item.key)


def with_value(column: str, raw: str, *more: tuple[str, str]) -> bytes:
    """A good record with the JSON text ``raw`` in ``column`` (and in each further (column, raw) pair)."""
    changes = {column: raw, **dict(more)}
    row = dict(GOOD_ROW, **{c: f"\x00V{i}" for i, c in enumerate(changes)})
    value = orjson.dumps({"relation": "m", "row": row, "delta": 1})
    for i, text in enumerate(changes.values()):
        value = value.replace(b'"\\u0000V%d"' % i, text.encode())
    return value


class Routes:
    """The compiled decoder with both of its Python paths recorded: which records reach which."""

    def __init__(self) -> None:
        self.codec = EventCodec(SCHEMA, compiled=False)
        self.fallback: list[bytes] = []
        self.refuse: list[bytes] = []
        self.decoder = codec_module._compiled_decoder(
            SCHEMA, self._called(self.fallback), codec_module.MAX_RECORD_BYTES, self._called(self.refuse)
        )

    def _called(self, log: list[bytes]) -> Any:
        def call(value: bytes) -> UpdateEvent | EventError:
            log.append(value)
            return self.codec._refuse(value)

        return call


def reference(value: bytes) -> tuple[Any, ...]:
    try:
        return verdict(EventCodec(SCHEMA, compiled=False).decode_slow(value))
    except EventError as err:
        return verdict(err)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(("d", "x")), DECIMAL_TEXT)
def test_decimal_strings_get_the_reference_value_or_reason(column: str, text: str) -> None:
    value = with_value(column, orjson.dumps(text).decode())
    routes = Routes()
    [item] = routes.decoder.decode_many([value])
    assert verdict(item) == reference(value)
    assert EventCodec(SCHEMA, compiled=True).decode_many([value]) == [item] or isinstance(item, EventError)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(tuple(GOOD_ROW)), RAW_VALUES)
def test_any_value_in_any_column_gets_the_reference_verdict(column: str, raw: str) -> None:
    value = with_value(column, raw)
    codec = EventCodec(SCHEMA, compiled=True)
    [item] = codec.decode_many([value])
    assert verdict(item) == reference(value)
    decoded, _, errors = codec.decode_grouped([value])
    assert [verdict(x) for x in decoded] == [reference(value)] and errors == isinstance(item, EventError)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(tuple(GOOD_ROW)), RAW_VALUES), min_size=2, max_size=4))
def test_several_bad_columns_get_the_reference_verdict(changes: list[tuple[str, str]]) -> None:
    """The C parser reads on past a null or a wrong type: the verdict is the first such column in schema
    order, as the reference decoder checks them, whatever the order in the record."""
    value = with_value(*changes[0], *changes[1:])
    [item] = EventCodec(SCHEMA, compiled=True).decode_many([value])
    assert verdict(item) == reference(value)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(tuple(GOOD_ROW)), RAW_VALUES)
def test_what_skips_the_fast_path_is_refused(column: str, raw: str) -> None:
    """Skipping the msgspec path must only ever cost time: every record sent straight to the reference
    decoder, or refused by the C parser itself, is one the reference decoder refuses (records here have
    no duplicate names, the one case left to chance)."""
    value = with_value(column, raw)
    routes = Routes()
    [item] = routes.decoder.decode_many([value])
    if routes.refuse or (not routes.fallback and isinstance(item, EventError)):
        assert reference(value)[0] == "rejected"


@pytest.mark.parametrize(
    ("column", "raw", "decided_in_c"),
    [
        ("d", '"2.50"', True),
        ("d", '"-7E+3"', True),
        ("d", "-12", True),
        ("d", "0.1", True),
        ("d", "1e-7", True),
        ("x", '"0.000"', True),
        ("x", "2.5", True),
        ("d", '" 2.5"', False),  # Decimal() strips the blanks: the reference decides
        ("d", '"1_0"', False),
        ("d", '"1e1234567890"', False),  # an exponent of 10 digits
        ("x", "12345678901234567890", False),  # beyond 18 digits, within 64 bits
    ],
)
def test_plain_decimals_are_decided_in_c(column: str, raw: str, decided_in_c: bool) -> None:
    value = with_value(column, raw)
    routes = Routes()
    [item] = routes.decoder.decode_many([value])
    assert verdict(item) == reference(value)
    assert (routes.fallback + routes.refuse == []) == decided_in_c


# (record, reason, decided by the C parser itself: a null or a scalar of the wrong kind in a column)
INVALID = [
    (with_value("d", "true"), "wrong-type", True),
    (with_value("x", "false"), "wrong-type", True),
    (with_value("i", "2.5"), "wrong-type", True),
    (with_value("i", '"7"'), "wrong-type", True),
    (with_value("s", "1"), "wrong-type", True),
    (with_value("s", "-0.0"), "wrong-type", True),
    (with_value("b", '"true"'), "wrong-type", True),
    (with_value("f", '"1.5"'), "wrong-type", True),
    (with_value("f", orjson.dumps("é" * 90).decode()), "wrong-type", True),  # the repr cut to 80
    (with_value("s", "null"), "null-value", True),
    (with_value("s", "null", ("d", "true")), "wrong-type", True),  # d comes first in the schema
    (with_value("f", "null", ("b", "1")), "wrong-type", True),
    (with_value("d", '"abc"'), "wrong-type", True),  # no digit and no n: Decimal() refuses it
    (with_value("d", '"NaN"'), "wrong-type", False),  # Decimal() reads it, then it is not finite
    (with_value("x", "[]"), "wrong-type", True),  # a container, shown by its size
    (with_value("k", "1.5"), "wrong-type", False),  # the key
    (with_value("s", "1", ("i", "null")).replace(b'"delta":1', b'"delta":0'), "zero-delta", False),
    (b'{"relation":"nope","row":{},"delta":1}', "unknown-relation", False),
    (b'{"relation":"m","row":{"d":1,"k":"z"},"delta":1}', "missing-column", False),
    (with_value("d", "1").replace(b'"delta":1', b'"delta":0'), "zero-delta", False),
    (with_value("d", "1").replace(b'"delta":1', b'"delta":"1"'), "bad-delta", False),
    (with_value("d", "1").replace(b'"delta":1', b'"delta":1,"extra":2'), "unknown-field", False),
    (b'{"relation":"m","delta":1}', "missing-field", False),
]


@pytest.mark.parametrize(("record", "reason", "in_c"), INVALID)
def test_certainly_invalid_records_skip_the_fast_path(record: bytes, reason: str, in_c: bool) -> None:
    routes = Routes()
    [item] = routes.decoder.decode_many([record])
    assert verdict(item) == reference(record) and verdict(item)[1] == reason
    assert routes.fallback == [] and routes.refuse == ([] if in_c else [record])
    decoded, groups, errors = routes.decoder.decode_grouped([record, with_value("d", "1")])
    assert [verdict(x) for x in decoded] == [reference(record), reference(with_value("d", "1"))]
    assert errors == 1 and [len(g) for g in groups.values()] == [1]
