"""The compiled event decoder must be built. Without it the decoder's own tests skip (the package still
works, on the msgspec and pure-Python paths) and this test fails, saying how to build it."""

from __future__ import annotations

from shared.events import codec


def test_compiled_decoder_is_built():
    assert codec._fastjson is not None, (
        "the compiled event decoder shared.events._fastjson is not built, so its tests were skipped. "
        "Build it with `make setup` (installs gcc and the Python headers if missing, then "
        "`pip install -e .` compiles shared/events/_fastjson.c), or, with a C compiler and the Python "
        "headers present, `.venv/bin/pip install -e .`"
    )
