"""Counts in results are integers: every service's bundled workloads, replayed straight through, restored
from a snapshot half way and (incremental engines) from checkpoint entries half way, give results whose
counters (`stats`, and counts such as `count`, `join_size` or `rows_scanned`) are JSON integers, never
`22.0`. The few statistics that are real numbers are named here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from ivmstream.config import build_config, schema_of
from ivmstream.engine import is_incremental
from ivmstream.events.readers import read_source
from ivmstream.replay import Replay
from ivmstream.service import DemoWorkload, ServiceDefinition, available_services, load_service

# Statistics that are not counts: the reservoir sampler's weight (Algorithm L's w).
REAL_STATS = {"reservoir": {"w"}}
# Counts wherever they appear in a result.
COUNT_KEYS = {
    "count",
    "distinct",
    "triangles",
    "join_size",
    "join_size_bound",
    "rows_scanned",
    "rows_total",
    "events",
    "k",
}


def workloads() -> Iterator[Any]:
    for name in sorted(available_services()):
        service = load_service(name)
        for workload in (service.demo, *service.workloads):
            if workload is not None:
                yield pytest.param(service, workload, id=f"{name}-{workload.name}")


def non_integers(value: Any, service: str, path: str = "", in_stats: bool = False) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            inner = in_stats or key == "stats"
            if key in REAL_STATS.get(service, ()) and in_stats:
                continue
            if (inner or key in COUNT_KEYS) and isinstance(item, float):
                yield f"{path}.{key} = {item!r}"
            else:
                yield from non_integers(item, service, f"{path}.{key}", inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if in_stats and isinstance(item, float):
                yield f"{path}[{i}] = {item!r}"
            else:
                yield from non_integers(item, service, f"{path}[{i}]", in_stats)


def results(service: ServiceDefinition, workload: DemoWorkload) -> Iterator[tuple[str, Any]]:
    config = build_config(service, dict(workload.config))
    records = list(
        read_source(
            workload.input,
            workload.format,
            key_field=config.key_field,
            schema=schema_of(service, config),
            options=dict(workload.read_options),
        )
    )
    half = len(records) // 2

    run = Replay(service, config)
    list(run.feed(records))
    yield "replayed", run.result()

    run = Replay(service, config)
    list(run.feed(records[:half]))
    for key, engine in list(run.engines.items()):
        restored = service.engine(config.options)
        restored.restore(engine.snapshot())
        run.engines[key] = restored
    yield "restored from a snapshot", run.result()
    list(run.feed(records[half:]))
    yield "continued after a snapshot", run.result()

    run = Replay(service, config)
    list(run.feed(records[:half]))
    if all(is_incremental(e) for e in run.engines.values()):
        for key, engine in list(run.engines.items()):
            restored = service.engine(config.options)
            restored.restore_entries(list(engine.all_entries()))  # type: ignore[attr-defined]
            run.engines[key] = restored
        yield "restored from entries", run.result()
        list(run.feed(records[half:]))
        yield "continued after entries", run.result()


@pytest.mark.parametrize(("service", "workload"), list(workloads()))
def test_counters_in_results_are_integers(service: ServiceDefinition, workload: DemoWorkload) -> None:
    for label, result in results(service, workload):
        # what a consumer reads: the result as the runtime serialises it
        parsed = orjson.loads(orjson.dumps(result, default=str))
        found = list(non_integers(parsed, service.name))
        assert not found, f"{service.name} {workload.name}, {label}: counters as floats: {found[:10]}"
