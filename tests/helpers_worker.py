"""In-process worker runs the runtime's tests compare: a worker stopped after a given batch and a fresh
one resumed from its checkpoints, a service whose engines take events only, and the published records
without the time they were published at."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import orjson

from ivmstream.config import ServiceConfig
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks
from ivmstream.service import ServiceDefinition
from ivmstream.state import MemoryStore


class Crash(Exception):
    """Raised by a batch hook: the worker stops after a batch was applied and published, before its
    checkpoint."""


def crash_then_resume(
    service: ServiceDefinition,
    config: ServiceConfig,
    cluster: InMemoryCluster,
    store: MemoryStore,
    crash_after: int | None,
) -> Worker:
    """With ``crash_after``, a worker stopped after that many batches (if the input has that many);
    then a worker run to the end on the same cluster and store, which is returned."""
    if crash_after is not None:
        seen: list[BatchApplied] = []

        def crash(applied: BatchApplied) -> None:
            seen.append(applied)
            if len(seen) == crash_after:
                raise Crash

        with contextlib.suppress(Crash):
            run_to_end(Worker(service, config, cluster, store, group="g", hooks=Hooks(batch_applied=[crash])))
    worker = Worker(service, config, cluster, store, group="g")
    run_to_end(worker)
    return worker


def events_only(service: ServiceDefinition) -> ServiceDefinition:
    """The service with its engines' columnar entry taken away: the runtime hands them events."""
    classes: dict[type, type] = {}

    def make(options: Any) -> Any:
        engine = service.engine(options)
        base = type(engine)
        if base not in classes:
            classes[base] = type(f"EventsOnly{base.__name__}", (base,), {"apply_columns": None})
        engine.__class__ = classes[base]
        return engine

    return dataclasses.replace(service, engine=make)


def unstamped(value: bytes | None) -> dict[str, Any]:
    """A published record without the time it was published at."""
    record = orjson.loads(value or b"null")
    record.pop("published_at")
    return record
