"""The rounded join index's hot steps, compiled (``_kernels.c``, built by setup.py where a C compiler
is present): an insert (the node store's bookkeeping, then the item re-weighed), the re-weighing
itself (moving an item between exponent buckets and propagating rounded-count changes up the join
tree, the loop where RSJoin spends its time), an insert's virtual batch size, and reading an entry of
that batch (the sampler's fill and stops).

The Python reference is ``JoinIndex.insert``, ``_reweigh``, ``delta_size``, ``delta_get`` and the
methods they call (index.py); the compiled functions perform the same container operations in the
same order, so the buckets, and so every sample drawn through them, are identical
(tests/unit/reservoir/test_reservoir_kernels.py). ``native`` is the compiled module when it is built and
``IVMSTREAM_PURE_PYTHON`` is not ``1``, else None (the index then runs its Python methods). Exact mode
(SJoin's Fenwick trees) has its own compiled step (exact_kernels.py).
"""

from __future__ import annotations

import os
from types import ModuleType

# Set to 1 to run the Python steps even where the compiled ones are built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"

try:  # the compiled steps (setup.py); without a C compiler the index's Python methods run
    from ivmstream.services.reservoir import _kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

native: ModuleType | None = compiled if ACTIVE == "compiled" else None

__all__ = ["ACTIVE", "PURE_PYTHON_ENV", "compiled", "native"]
