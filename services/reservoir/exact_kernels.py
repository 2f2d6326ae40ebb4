"""The exact join index's hot step, compiled (``_exact_kernels.c``, built by setup.py where a C compiler
is present): SJoin's re-weighing of an item, which places it in its key's Fenwick tree in every
structure D[e→*] and propagates every change of a key's exact count to the parent items with that key,
up the join tree (the loop where the ``sjoin`` strategies spend their time).

The Python reference is ``JoinIndex._reweigh`` in exact mode and the methods it calls (index.py); the
compiled function performs the same container operations in the same order, so the rows, the Fenwick
trees, and so every sample drawn through them, are identical
(tests/unit/reservoir/test_reservoir_exact_kernels.py). ``native`` is the compiled module when it is
built and ``IVMSTREAM_PURE_PYTHON`` is not ``1``, else None (the index then runs its Python methods).
"""

from __future__ import annotations

import os
from types import ModuleType

# Set to 1 to run the Python steps even where the compiled ones are built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"

try:  # the compiled step (setup.py); without a C compiler the index's Python methods run
    from ivmstream.services.reservoir import _exact_kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

native: ModuleType | None = compiled if ACTIVE == "compiled" else None

__all__ = ["ACTIVE", "PURE_PYTHON_ENV", "compiled", "native"]
