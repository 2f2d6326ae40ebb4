"""State encoding of non-finite floats (``ivmstream.state.floats``): any JSON-shaped value round-trips
exactly (inf, -inf, NaN, -0.0 included), a value without a non-finite float is written in orjson's
own bytes (stored entries keep their form), and strings that look like the tag stay strings."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events.floats import state_bytes, state_loads

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.inf, -math.inf, math.nan, -0.0, 0.0]),
    st.text(max_size=12),
    st.sampled_from(['{"$float":"inf"}', "null", "$float", "nan"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.just("$float")), inner, max_size=3),
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as values: NaN equal to NaN, -0.0 told from 0.0, types kept."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is list:
        return len(a) == len(b) and all(map(_same, a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _finite(v: Any) -> bool:
    if type(v) is float:
        return math.isfinite(v)
    if type(v) is list:
        return all(map(_finite, v))
    if type(v) is dict:
        return all(map(_finite, v.values()))
    return True


def _tag_shaped(v: Any) -> bool:
    """A dict of the tag's shape: the one value the encoding cannot write as itself."""
    if type(v) is list:
        return any(map(_tag_shaped, v))
    if type(v) is dict:
        return (len(v) == 1 and "$float" in v) or any(map(_tag_shaped, v.values()))
    return False


@settings(max_examples=300, deadline=None)
@given(values)
def test_values_round_trip_exactly(value: Any) -> None:
    if _tag_shaped(value):
        return  # state never holds a one-key {"$float": ...} object of its own (shown below)
    data = state_bytes(value)
    assert _same(state_loads(data), value)
    assert _same(state_loads(data.decode()), value)
    assert _same(state_loads(memoryview(data)), value)
    if _finite(value):
        assert data == orjson.dumps(value)  # the bytes stored without a tag


def test_non_finite_floats_are_tagged_and_nothing_else_changes() -> None:
    assert state_bytes([1, math.inf, -math.inf, math.nan, -0.0, None, "null"]) == (
        b'[1,{"$float":"inf"},{"$float":"-inf"},{"$float":"nan"},-0.0,null,"null"]'
    )
    assert state_bytes({"a": (2.5, None)}) == b'{"a":[2.5,null]}'
    # a string holding the tag's text is escaped in JSON, so it is read back as that string
    assert state_loads(state_bytes(['{"$float":"inf"}', math.inf])) == ['{"$float":"inf"}', math.inf]


def test_an_unknown_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="not inf, -inf or nan"):
        state_loads(b'[{"$float":"big"}]')
