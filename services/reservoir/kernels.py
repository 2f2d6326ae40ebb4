"""The rounded join index's weight updates, compiled (``_kernels.c``, built by setup.py where a C
compiler is present): re-weighing an item in its structures, moving it between exponent buckets and
propagating rounded-count changes up the join tree, the loop where RSJoin spends its time.

The Python reference is ``JoinIndex._reweigh`` and the methods it calls (index.py); the compiled
``reweigh`` performs the same container operations in the same order, so the buckets, and so every
sample drawn through them, are identical (tests/unit/reservoir/test_kernels.py). ``reweigh`` is the
compiled function when it is built and ``IVMSTREAM_PURE_PYTHON`` is not ``1``, else None (the index
then runs its Python methods). Exact mode (SJoin's Fenwick trees) runs in Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# Set to 1 to run the Python steps even where the compiled ones are built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"

try:  # the compiled steps (setup.py); without a C compiler the index's Python methods run
    from ivmstream.services.reservoir import _kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

Reweigh = Callable[[Any, int, tuple[Any, ...], int, int], None]
reweigh: Reweigh | None = compiled.reweigh if ACTIVE == "compiled" else None

__all__ = ["ACTIVE", "PURE_PYTHON_ENV", "compiled", "reweigh"]
