"""The compiled fast decoder agrees with the reference Python decoder on everything it accepts."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import EventCodec, EventError, Relation, Schema

SCHEMAS = [
    Schema.of(
        Relation.of("r", a="int", f="float", s="str"), Relation.of("t", d="decimal", n="number", b="bool")
    ),
    Schema.of(Relation.of("r", a="int", f="float", s="str"), key_field="k"),
]

scalars = st.one_of(
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.sampled_from(["1.5", "-0.25", "1e3", "abc", "NaN", "Infinity", "7"]),
)
columns = st.sampled_from(["a", "f", "s", "d", "n", "b", "k", "zz"])
events = st.fixed_dictionaries(
    {
        "relation": st.sampled_from(["r", "t", "u", 3]),
        "row": st.dictionaries(columns, scalars, max_size=5),
        "delta": st.one_of(st.integers(-3, 3), st.sampled_from([1.0, "1", True, None])),
    },
    optional={"extra": st.integers(-5, 5)},
)


def outcome(fn, value):
    try:
        ev = fn(value)
    except EventError as err:
        return ("rejected", err.code)
    except Exception as exc:  # the fast path signals "not mine" with its own exceptions
        return ("fast-declined", type(exc).__name__)
    return ("accepted", ev.relation, tuple(ev.row.items()), ev.delta, ev.key)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(SCHEMAS), events)
def test_fast_and_reference_decoders_agree(schema, event):
    codec = EventCodec(schema)
    value = orjson.dumps(event)
    fast = outcome(codec._fast.decode, value)
    slow = outcome(codec.decode_slow, value)
    if fast[0] == "accepted":
        assert slow == fast
    else:
        assert slow[0] == "rejected", (event, slow)
    # The public entry points give the reference decoder's verdict either way.
    assert outcome(codec.decode, value) == slow
    [batch] = codec.decode_many([value])
    assert (
        ("rejected", batch.code) if isinstance(batch, EventError) else outcome(lambda _: batch, None)
    ) == slow


def test_fast_path_handles_the_common_case():
    codec = EventCodec(SCHEMAS[1])
    ev = codec._fast.decode(b'{"relation":"r","row":{"a":1,"f":2,"s":"x","k":7},"delta":-2}')
    assert (ev.relation, ev.row, ev.delta, ev.key) == ("r", {"a": 1, "f": 2.0, "s": "x"}, -2, "7")
    assert type(ev.row["f"]) is float
