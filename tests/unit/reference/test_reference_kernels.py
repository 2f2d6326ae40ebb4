"""The compiled member hashes (services/reference/_kernels.c) are hashlib's BLAKE2b-128 read big-endian,
as ``member_hash`` computes them one at a time: on member keys of every length (across the 128-byte block
boundaries); the engine hashes in C unless IVMSTREAM_PURE_PYTHON=1 asks for hashlib."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reference import engine

if engine.compiled_member_hashes is None:  # never skipped: without the extension these tests fail, saying why
    pytest.fail(
        "the compiled reference kernel ivmstream.services.reference._kernels is not built. Build it with "
        "`make setup` (installs gcc and the Python headers if missing, then `pip install -e .` compiles "
        "services/reference/_kernels.c), or, with a C compiler and the Python headers present, "
        "`.venv/bin/pip install -e .`",
        pytrace=False,
    )

C = engine.compiled_member_hashes


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
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"IVMSTREAM_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"
