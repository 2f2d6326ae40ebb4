"""The compiled decoder reads a float column's number text correctly rounded: most texts of real data take
a fast path (at most 2^53 in its digits, a power of ten up to 10^22, one IEEE multiplication or division),
the rest the general parser; both must give the bits ``float(text)`` gives, at the path's edges too."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, Relation, Schema
from ivmstream.events import codec as codec_module
from tests.unit.extension_checks import require_built

require_built(
    codec_module._fastjson,
    "event decoder",
    "ivmstream.events._fastjson",
    "shared/events/_fastjson*.c",
)

SCHEMA = Schema.of(Relation("r", (("v", "float"),)))
COMPILED = EventCodec(SCHEMA, compiled=True)


@st.composite
def number_texts(draw: st.DrawFn) -> str:
    """JSON number texts with a fraction or an exponent: significands around 2^53 and below, leading and
    trailing zeros, exponents around ±22 and far beyond, signs, zero."""
    digits = draw(
        st.one_of(
            st.integers(0, 10**6),
            st.integers(2**53 - 3, 2**53 + 3),
            st.integers(10**15, 10**19),
            st.integers(0, 2**64),
        )
    )
    text = str(digits)
    point = draw(st.integers(0, len(text)))
    whole, frac = text[:point] or "0", text[point:]
    if len(whole) > 1:
        whole = whole.lstrip("0") or "0"
    frac = "0" * draw(st.integers(0, 3)) + frac + "0" * draw(st.integers(0, 3))
    exponent = draw(st.one_of(st.none(), st.integers(-30, 30), st.integers(-400, 400)))
    out = whole + ("." + (frac or "0") if frac or exponent is None else "")
    if exponent is not None:
        sign = draw(st.sampled_from(["", "+"])) if exponent >= 0 else ""
        out += draw(st.sampled_from(["e", "E"])) + sign + str(exponent)
    return draw(st.sampled_from(["", "-"])) + out


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


@settings(max_examples=1500, deadline=None)
@given(number_texts())
def test_float_text_decodes_to_the_bits_float_gives(text: str) -> None:
    want = float(text)
    [event] = COMPILED.decode_many([f'{{"relation":"r","row":{{"v":{text}}},"delta":1}}'.encode()])
    if want in (float("inf"), float("-inf")):  # beyond a double: refused by both decoders
        assert not hasattr(event, "row")
        return
    assert bits(event.row["v"]) == bits(want), text


@pytest.mark.parametrize(
    "text",
    [
        "9007199254740992.0",
        "9007199254740993.0",
        "9007199254740993e-1",
        "1e22",
        "1e23",
        "1.5e-22",
        "1.5e-23",
        "-0.0",
        "0e999",
        "-0e-999",
        "0.000000000000000000000000001",
        "123456.789",
        "4.35",
        "1e-7",
        "0.1",
    ],
)
def test_edges_of_the_fast_path(text: str) -> None:
    [event] = COMPILED.decode_many([f'{{"relation":"r","row":{{"v":{text}}},"delta":1}}'.encode()])
    assert bits(event.row["v"]) == bits(float(text)), text
