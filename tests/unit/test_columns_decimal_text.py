"""``decode_columns(..., decimal_text=True)`` (for an engine whose ``ColumnarEngine.decimal_text`` is set):
a decimal column's value written as a plain decimal string stays that string, and ``Decimal()`` of it is
the very Decimal (sign, digits and exponent) the default decoding makes; every other value, refusal,
record index and delta is the default decoding's."""

from __future__ import annotations

from decimal import Decimal

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import takes_decimal_text
from ivmstream.events import Relation, Schema
from ivmstream.events.codec import EventCodec
from ivmstream.events.columns import decode_columns
from ivmstream.services.reference.engine import BagEngine

CODEC = EventCodec(Schema.of(Relation.of("r", p="decimal", x="exact"), key_field="k"))
PLAIN = ["1.5", "1.50", "+.5", "5.", "-0", "0.000", "1e3", "2E-7", "-12.25e+2", "007", "1e999999999"]
NOT_PLAIN = ["NaN", "Infinity", "-inf", " 1.5", "1_0", "", ".", "e5", "1e1234567890", "٣"]
decimals = st.one_of(
    st.sampled_from(PLAIN + NOT_PLAIN),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
)
records = st.lists(
    st.builds(
        lambda p, x, k, d: orjson.dumps(
            {"relation": "r", "row": {"p": p, "x": x, "s": "a"}, "k": k, "delta": d}
        ),
        decimals,
        st.sampled_from(["1.5", 2, "2.50"]),
        st.sampled_from("ab"),
        st.sampled_from([1, -1, 2]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(records)
def test_plain_decimal_strings_stay_text_and_read_as_the_same_decimals(values):
    plain = CODEC.column_lists(values)
    text = CODEC.column_lists(values, True)
    assert plain is not None and text is not None  # the compiled decoder is built (test_codec_compiled)
    assert repr(text[0]) == repr(plain[0])  # the same refusals
    assert text[1].keys() == plain[1].keys()
    assert sum(len(r["r"][0]) for r in plain[1].values()) + len(plain[0]) == len(values)
    for key, relations in plain[1].items():
        want, got = relations["r"], text[1][key]["r"]
        assert got[:2] == want[:2] and got[3:] == want[3:]  # indexes, deltas, the exact column
        for index, decoded, kept in zip(want[0], want[2], got[2], strict=True):
            written = orjson.loads(values[index])["row"]["p"]
            assert type(kept) is (str if type(written) is str else Decimal)
            assert kept == written if type(written) is str else kept is not None
            assert Decimal(kept).as_tuple() == decoded.as_tuple()
            if type(written) is str:  # brute force: the JSON string's text read by Decimal() itself
                assert decoded.as_tuple() == Decimal(written).as_tuple()


def test_decode_columns_passes_it_on_and_the_reference_engine_asks_for_it():
    value = orjson.dumps({"relation": "r", "row": {"p": "1.50", "x": 1, "k": "a"}, "delta": 1})
    _errors, batches, _records = decode_columns(CODEC, [value], decimal_text=True)
    assert batches["a"].relations["r"].columns["p"] == ["1.50"]
    _errors, batches, _records = decode_columns(CODEC, [value])
    assert batches["a"].relations["r"].columns["p"] == [Decimal("1.50")]
    assert takes_decimal_text(BagEngine({"r": {"p": "decimal"}}))
    assert not takes_decimal_text(object())
