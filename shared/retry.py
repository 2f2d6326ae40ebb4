"""Retrying a call to a server that may be briefly away (Redis restarting, a network blip).

A worker would rather wait a few seconds than die and replay from its last checkpoint, but it must not
wait forever: past ``give_up_after`` seconds the last error is raised and the worker exits with one
line (docs/architecture.md, "Redis outages"). Waits start at 0.1 s and double up to 2 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger("ivmstream.retry")


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    retry_on: tuple[type[BaseException], ...],
    give_up_after: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[T, int]:
    """``call()``'s value and how many attempts failed before it; an error outside ``retry_on``, or one
    still failing after ``give_up_after`` seconds, propagates."""
    deadline = clock() + give_up_after
    wait = 0.1
    failed = 0
    while True:
        try:
            return call(), failed
        except retry_on as exc:
            failed += 1
            if clock() + wait > deadline:
                raise
            log.warning("%s failed (%s); retrying in %.1fs", what, exc, wait)
            sleep(wait)
            wait = min(2.0, wait * 2)
