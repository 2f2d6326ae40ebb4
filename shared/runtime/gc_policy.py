"""How a worker process treats Python's cyclic garbage collector.

CPython starts a young-generation collection whenever the number of live container objects allocated
since the last one passes ``threshold0`` (700). A consumer batch keeps two per record alive at once
(the Kafka message and the decoded row), so with the default a 2,000-record batch sets off a collection
every ~350 records, each walking the batch's messages, and every so often a full collection walks
every object of the process, most of them made at start-up (modules, classes, the clients) and alive
until exit. None of that finds garbage: a batch's objects are freed by reference counting as soon as
it is processed. In ``bench/runtime.py`` those collections were 10-20% of a no-op worker's time.

The policy, for processes that are workers and nothing else:
- collect once, then freeze the start-up heap (``gc.freeze``), so no later collection walks it again;
  reference counting still frees frozen objects, and a freshly collected heap holds no garbage cycles;
- raise ``threshold0`` well above what one batch keeps alive, so the young generation is collected
  only when the process really accumulates containers (growing engine state, or cyclic garbage,
  which is then bounded by the threshold).

Everything allocated later, engine state included, stays under the collector. This is process-wide,
so only entry points that own their process apply it (``ivmstream run``, the runtime benchmark), never
library code or tests sharing a process.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000  # live new containers before a young collection; CPython's default is 700


@contextmanager
def worker_gc(young_threshold: int = YOUNG_THRESHOLD) -> Iterator[int]:
    """Apply the worker GC policy for the duration; yields the number of start-up objects frozen."""
    if young_threshold < 1:
        raise ValueError(f"young_threshold must be positive, got {young_threshold}")
    previous = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, *previous[1:])
    try:
        yield gc.get_freeze_count()
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()
