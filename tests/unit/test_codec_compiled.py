"""The compiled decoder (shared/events/_fastjson.c) gives exactly the reference decoder's verdicts.

It parses canonical records straight into UpdateEvents and declines everything else to the Python fallback.
A wrong "accept" there silently corrupts a view, so every path is compared with ``decode_slow`` type by type:
1 == 1.0 == True and 0.0 == -0.0 in Python, which a plain ``==`` on events would let through.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings

from ivmstream.events import EventCodec, Schema
from tests.unit.codec_cases import (
    KEYED,
    PLAIN,
    Recorder,
    accepted,
    batches,
    check_batch,
    codec_module,
    codecs,
    mutated,
    outcome,
    reference,
)

# --- the extension is built and used ------------------------------------------------------------------


def test_compiled_decoder_is_used_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once built, every codec uses the C decoder unless IVMSTREAM_PURE_PYTHON=1 or compiled=False."""
    monkeypatch.delenv(codec_module.PURE_PYTHON_ENV, raising=False)
    assert EventCodec(PLAIN).compiled is True
    codec = EventCodec(KEYED, compiled=True)
    assert codec.compiled is True
    assert EventCodec(KEYED, compiled=False).compiled is False
    ev = codec.decode_many([b'{"relation":"r","row":{"i":1,"f":2,"s":"x","b":true,"k":7},"delta":-2}'])[0]
    assert outcome(ev) == accepted("r", {"i": 1, "f": 2.0, "s": "x", "b": True}, -2, "7")
    monkeypatch.setenv(codec_module.PURE_PYTHON_ENV, "1")
    assert EventCodec(PLAIN).compiled is False
    assert EventCodec(PLAIN, compiled=True).compiled is True


def test_canonical_records_are_decided_in_c_and_the_rest_declined() -> None:
    """The differential tests would pass vacuously if C declined everything: check what it decides itself."""
    _, pure = codecs(KEYED)
    recorder = Recorder(pure)
    decoder = codec_module._compiled_decoder(KEYED, recorder)
    mine = [
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',
        b'{"delta":-7,"relation":"r","row":{"k":3,"b":true,"s":"","f":-1,"i":999999999999999999}}',
        b' {\n"relation" : "e" ,\t"row" : { "k" : "\xc3\xa7" } , "delta" : 2 }\r\n',
        b'{"relation":"\xc3\xa7","row":{"\xc3\xb1":1e5,"k":"z"},"delta":1}',
        b'{"relation":"t","row":{"x":-12,"n":1.5,"d":1,"k":"a"},"delta":1}',
        b'{"relation":"t","row":{"x":"2.50","n":1,"d":-0.1,"k":"a"},"delta":1}',
        b'{"relation":"t","row":{"x":1e2,"n":1,"d":"-7E+3","k":"a"},"delta":1}',
    ]
    declined = [
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"\\u0078","b":false,"k":"a"},"delta":1}',  # an escape
        b'{"relation":"r","row":{"i":1000000000000000000,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',
        b'{"row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"relation":"r","delta":1}',  # row first
        b'{"relation":"r","row":{"i":1,"i":2,"f":2.5,"s":"x","b":false,"k":"a"},"delta":1}',  # duplicate
        b'{"relation":"r","row":{"i":1,"f":2.5,"s":"x","b":false,"k":"a"},"delta":0}',  # invalid
        b'{"relation":"e","row":{"k":1.5},"delta":1}',
        b'{"relation":"t","row":{"x":1,"n":1,"d":" 1.5","k":"a"},"delta":1}',  # Decimal() reads it; not C
        b'{"relation":"t","row":{"x":1,"n":1,"d":"1e1234567890","k":"a"},"delta":1}',  # a long exponent
        b"[]",
        None,
        "{}",
    ]
    decoded, groups, errors = decoder.decode_grouped(mine + declined)
    assert recorder.declined == declined
    assert [outcome(item) for item in decoded] == [reference(pure, v) for v in mine + declined]
    assert [outcome(item) for item in decoded[: len(mine)]] == [
        accepted("r", {"i": 1, "f": 2.5, "s": "x", "b": False}, 1, "a"),
        accepted("r", {"i": 999999999999999999, "f": -1.0, "s": "", "b": True}, -7, "3"),
        accepted("e", {}, 2, "ç"),
        accepted("ç", {"ñ": 100000.0}, 1, "z"),
        accepted("t", {"x": -12, "n": 1.5, "d": Decimal(1)}, 1, "a"),
        accepted("t", {"x": Decimal("2.50"), "n": 1, "d": Decimal("-0.1")}, 1, "a"),
        accepted("t", {"x": Decimal("100.0"), "n": 1, "d": Decimal("-7E+3")}, 1, "a"),
    ]
    assert list(groups) == ["a", "3", "ç", "z"] and errors == 5


# --- differential tests -------------------------------------------------------------------------------


@settings(max_examples=2000, deadline=None)
@given(batches())
def test_compiled_pure_and_reference_agree_on_generated_records(batch: tuple[Schema, list[bytes]]) -> None:
    """Records as producers write them and in every legal variation: each path must give the same verdict."""
    schema, values = batch
    check_batch(schema, values)


@settings(max_examples=1500, deadline=None)
@given(mutated())
def test_compiled_and_reference_agree_on_mutated_records(batch: tuple[Schema, list[bytes]]) -> None:
    """Byte-level damage to canonical records hits the C parser's every branch; it must only ever decline."""
    schema, values = batch
    check_batch(schema, values)


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"   ",
        b"null",
        b"{}",
        b"[]",
        b"\x00",
        b"\xff",
        b'"\xff"',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xff","b":true},"delta":1}',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xed\xa0\x80","b":true},"delta":1}',  # a surrogate
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\xc3","b":true},"delta":1}',  # truncated UTF-8
        b'{"relation":"\xff","row":{},"delta":1}',
        b'{"relation":"e","row":{"\xff":1},"delta":1}',
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"a\x00b","b":true},"delta":1}',  # raw NUL
        b'{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"a\\u0000b","b":true},"delta":1}',
        b'{"relation":"e","row":{},"delta":1}\x00',
        b'\x00{"relation":"e","row":{},"delta":1}',
        '{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\u00e9","b":true},"delta":1}',  # str, not bytes
        '{"relation":"e","row":{},"delta":1}',
        '{"relation":"r","row":{"i":1,"f":1.5,"n":2,"s":"\ud800","b":true},"delta":1}',  # a lone surrogate
        bytearray(b'{"relation":"e","row":{},"delta":1}'),
        memoryview(b'{"relation":"e","row":{},"delta":1}'),
    ],
)
def test_raw_values_agree(value: Any) -> None:
    """Values that are not canonical JSON at all: declined by C, and the same verdict every way."""
    check_batch(PLAIN, [value])
