"""First-order maintenance of a simple undirected graph, a batch of edge events per compiled call.

Graph-mode first-order IVM spends its time on two things per edge event: the common-neighbour count
of the edge's endpoints (a sparse dot product of two index rows) and the interpreter around it
(validating the event, two directed updates, four index bumps, the change log). When E is a simple
graph (symmetric, every multiplicity 1, no self-loops, which is all graph events can build)
``_graph_kernels.SimpleGraph`` mirrors E as int adjacency sets and applies a whole batch in C: each
event is validated, sees the state the previous one left, adds 6·m·|N(u) ∩ N(v)| to Q (the two
directed updates of docs/triangles/algorithm.md §2.11, each adding 3·m·|N(u) ∩ N(v)| when there is no
self-loop) and updates the sets, counting the same work units as the Python path. The engine's dict
indexes are emptied while batches run on the mirror and rewritten from it (rows in key order) when
read: a snapshot, a switch of plan, an update on the Python path. Any event it does not apply (every
one the Python path rejects) is handed back to that path, and so is every event after a switch of
``auto``'s plan.

The Python path (``FirstOrderEngine._update`` through ``TriangleEngine._apply_graph``) is the
reference and the fallback: it runs where the extension is not built, with ``IVMSTREAM_PURE_PYTHON=1``,
for ``always_iterate_s`` and whenever E is not a simple graph (``apply_tuple`` can store directed
tuples, multiplicities and self-loops); tests/unit/triangles/test_simple_graph.py checks both against
brute force after every event.
"""

from __future__ import annotations

import os
from typing import Any

from ivmstream.services.triangles.kernels import PURE_PYTHON_ENV

try:  # built by setup.py where a C compiler is present
    from ivmstream.services.triangles import _graph_kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

# run()'s status: every event applied, events[next] left to the Python path, events[next - 1] to price
DONE, PYTHON, PRICE = 0, 1, 2


def mirror(fwd: dict[Any, dict[Any, int]], bwd: dict[Any, dict[Any, int]]) -> Any:
    """The compiled mirror of E (fwd/bwd: its index by first and second variable), or None where the
    compiled path does not run or E is not a simple graph."""
    if ACTIVE != "compiled":
        return None
    try:
        return compiled.SimpleGraph(fwd, bwd)
    except ValueError:
        return None


__all__ = ["ACTIVE", "DONE", "PRICE", "PYTHON", "compiled", "mirror"]
