"""The compiled reference kernels (services/reference/_kernels.c): member hashes are hashlib's BLAKE2b-128
read big-endian, as ``member_hash`` computes them one at a time, on member keys of every length (across
the 128-byte block boundaries); member keys are orjson's bytes of ``[relation, [values]]``, or are left
to orjson (floats, ints beyond 64 bits, strings it refuses); the engine uses them unless
IVMSTREAM_PURE_PYTHON=1 asks for hashlib and orjson."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reference import engine
from tests.unit.extension_checks import printed_in_child, require_built

require_built(
    engine.compiled_member_hashes,
    "reference kernels",
    "ivmstream.services.reference._kernels",
    "services/reference/_*.c",
)

C = engine.compiled_member_hashes
KEYS = engine.compiled_member_keys

values = st.one_of(
    st.text(max_size=6),  # control characters, quotes, backslashes, non-ASCII, lone surrogates
    st.integers(-(2**64), 2**64),  # inside and beyond 64 bits
    st.booleans(),
    st.floats(allow_nan=False),  # left to orjson
)


@settings(max_examples=300)
@given(st.text(max_size=4), st.integers(1, 4), st.lists(st.lists(values, min_size=4, max_size=4), max_size=3))
def test_compiled_member_keys_are_orjsons_bytes_or_left_to_it(relation, ncol, rows):
    columns = [[row[j] for row in rows] for j in range(ncol)]
    try:
        want = [orjson.dumps([relation, [col[i] for col in columns]]) for i in range(len(rows))]
    except TypeError:  # orjson refuses it (a surrogate, an int beyond 64 bits): the engine raises as before
        want = None
    got = KEYS(relation, columns)
    if got is None:  # left to orjson: a float, an int beyond 64 bits, a string orjson refuses
        assert want is None or any(
            type(v) is float or (type(v) is int and not -(2**63) <= v < 2**63) for col in columns for v in col
        )
    else:
        assert got == want


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_compiled_hashes_equal_hashlibs(keys):
    assert C(keys) == engine.py_member_hashes(keys) == [engine.member_hash(k) for k in keys]


def test_every_length_around_the_block_boundaries():
    keys = [bytes(range(256))[:n] for n in range(256)] + [b"x" * n for n in (127, 128, 129, 255, 256, 257)]
    assert C(keys) == [engine.member_hash(k) for k in keys]


def test_a_key_that_is_not_bytes_is_refused():
    with pytest.raises(TypeError, match="bytes"):
        C([b"a", "b"])  # type: ignore[list-item]


def test_the_engine_hashes_in_c_unless_pure_python_is_asked_for():
    assert engine.member_hashes is C
    code = (
        "from ivmstream.services.reference import engine; "
        "print(engine.member_hashes is engine.py_member_hashes)"
    )
    assert printed_in_child(code) == ["True"]
