"""What the tests of each compiled extension share: the failure when the extension is expected but not
built (a test module fails, never skips, and says how to build it), and what a child interpreter prints
with IVMSTREAM_PURE_PYTHON set, to check which form a module picked at import."""

from __future__ import annotations

import subprocess
import sys

import pytest


def require_built(native: object, what: str, module: str, source: str) -> None:
    """Fail the importing test module when ``native`` (the extension, or what its Python module took from
    it) is None, naming the extension and the C source `pip install -e .` compiles into it."""
    if native is None:
        pytest.fail(
            f"{module} (the compiled {what}) is not built. Build it with `make setup` (installs gcc and the "
            f"Python headers if missing, then `pip install -e .` compiles {source}), or, with a C compiler "
            "and the Python headers present, `.venv/bin/pip install -e .`",
            pytrace=False,
        )


def printed_in_child(code: str, pure_python: str = "1") -> list[str]:
    """The words ``code`` prints in a child interpreter whose environment holds only
    IVMSTREAM_PURE_PYTHON=``pure_python``."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={"IVMSTREAM_PURE_PYTHON": pure_python},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
