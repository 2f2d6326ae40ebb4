"""Timing a ``Worker``'s run from its hooks (``ivmstream.runtime.hooks``): nothing of the worker is
replaced, so a benchmark times exactly the code ``ivmstream run`` runs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ivmstream.runtime.hooks import CheckpointWritten, PartitionsChanged


def mark_run(worker: Any, marks: dict[str, float]) -> None:
    """Record in ``marks`` (``time.perf_counter()`` values) when ``worker``'s run reaches each phase:
    ``assigned`` (its first assignment began: restoring its state), ``restored`` (that assignment
    ended), ``first_batch`` (its first batch arrived) and ``checkpointed`` (the first checkpoint
    written after the caller set ``marks["caught_up"]``: the final one of ``run``)."""
    hooks = worker.hooks

    def assigned(change: PartitionsChanged) -> None:
        now = time.perf_counter()
        if "assigned" not in marks:
            marks["assigned"], marks["restored"] = now - change.seconds, now

    def checkpointed(_written: CheckpointWritten) -> None:
        if "caught_up" in marks:
            marks.setdefault("checkpointed", time.perf_counter())

    hooks.partitions_assigned.append(assigned)
    hooks.batch_received.append(lambda _records: marks.setdefault("first_batch", time.perf_counter()))
    hooks.checkpoint_written.append(checkpointed)


def run_until_caught_up(
    worker: Any, ends: Mapping[int, int], timeout: float = 600.0
) -> tuple[float, dict[str, Any]]:
    """Run a ``Worker`` until its position on every partition reaches ``ends`` (its final checkpoint is
    written when ``run`` returns): the seconds from its first batch, and every key's result then."""
    marks: dict[str, float] = {}
    mark_run(worker, marks)
    results: dict[str, Any] = {}
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
    return time.perf_counter() - marks["first_batch"], results
