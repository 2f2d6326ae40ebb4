"""Where benchmarks time a ``Worker`` by wrapping its methods (``_process``, ``_on_assign``, ``close``).

Kept in one place on purpose: these wrappers are replaced by the Worker's hooks interface, and the
other scripts that still wrap methods are listed in bench/README.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def run_until_caught_up(
    worker: Any, ends: Mapping[int, int], timeout: float = 600.0
) -> tuple[float, dict[str, Any]]:
    """Run a ``Worker`` until its position on every partition reaches ``ends`` (its final checkpoint is
    written when ``run`` returns): the seconds from its first batch, and every key's result then."""
    marks: dict[str, float] = {}
    process = worker._process
    results: dict[str, Any] = {}

    def timed_process(msgs: Any) -> None:
        marks.setdefault("first", time.perf_counter())
        process(msgs)

    worker._process = timed_process
    deadline = time.monotonic() + timeout

    def caught_up(w: Any) -> bool:
        positions = w.positions()
        if all((positions.get(p) or 0) >= end for p, end in ends.items()):
            results.update(w.results())
            return True
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker did not catch up: {positions}")
        return False

    worker.run(until=caught_up)
    return time.perf_counter() - marks["first"], results
