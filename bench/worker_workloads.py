"""The worker throughput benchmark's input: per service, its benchmark workload as the encoded records a
worker consumes and the service config it runs with (batch size and checkpoint interval at the runtime's
defaults unless the service's own benchmark sets them).

Each builder returns a ``Workload`` at one of two scales: ``full`` (a few seconds through the worker)
and ``quick`` (a smoke run of well under a second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ivmstream.events import UpdateEvent, encode_event


@dataclass
class Workload:
    """What one service's worker consumes: the records (one partition, in order) and its raw config."""

    service: str
    description: str
    config: dict[str, Any]
    values: list[bytes]
    keys: list[bytes | None] = field(default_factory=list)
    passes: int = 1  # runs per measurement, each on a fresh worker: a workload too short to time once

    def record_keys(self) -> list[bytes | None]:
        return self.keys or [None] * len(self.values)


def _reference(quick: bool) -> Workload:
    n = 4_000 if quick else 200_000
    values = [
        encode_event(
            UpdateEvent("items", {"item": f"item{i % 997}", "qty": i % 50 + 1, "price": f"{i % 89}.25"}, 1),
        )
        for i in range(n)
    ]
    return Workload("reference", f"{n:,} item inserts over 997 items", {}, values)


def _triangles(quick: bool) -> Workload:
    from bench import triangles_workloads as wl
    from bench.triangles_cases import KEY, KEY_FIELD

    warm, churn = (1_000, 1_000) if quick else (30_000, 30_000)
    triples, _meta = wl.graph_churn_events(warm=warm, churn=churn, seed=5)
    values = [
        encode_event(UpdateEvent("edges", {"src": u, "dst": v}, m, KEY), KEY_FIELD) for u, v, m in triples
    ]
    return Workload(
        "triangles",
        f"R-MAT graph churn: {warm:,} inserts then {churn:,} insert/delete steps (auto)",
        {"mode": "graph", "strategy": "auto", "key_field": KEY_FIELD},
        values,
        [KEY.encode()] * len(values),
    )


def _fivm(quick: bool) -> Workload:
    from bench.fivm_data import housing, housing_config
    from bench.fivm_runs import FEATURES_27, events

    postcodes = 100 if quick else 10_000
    flat = [ev for batch in events(housing(1, postcodes, seed=1)) for ev in batch]
    return Workload(
        "fivm",
        f"Housing s=1, {postcodes:,} postcodes, covariance over 27 variables",
        housing_config("covariance", FEATURES_27),
        [encode_event(ev) for ev in flat],
    )


def _vwap(quick: bool) -> Workload:
    from bench.vwap_engines import TRACE, load_trace

    trace = load_trace(TRACE, "bids")[: 2_000 if quick else 46_166]
    return Workload(
        "vwap",
        f"finance trace (bids), first {len(trace):,} order-book events, vwap (auto)",
        {"query": "vwap", "strategy": "auto"},
        [encode_event(UpdateEvent(rel, row, m)) for rel, row, m in trace],
        passes=1 if quick else 5,
    )


def _reservoir(quick: bool) -> Workload:
    from bench.reservoir_graphs import epinions_like, line, stream_for

    edges = 600 if quick else 20_000
    query = line(3, 1_000, "rsjoin")
    flat = stream_for(query, epinions_like(edges, seed=1))
    return Workload(
        "reservoir",
        f"RSJoin line-3, {edges:,} edges, k = 1,000",
        query,
        [encode_event(ev) for ev in flat],
    )


def _sketches(quick: bool) -> Workload:
    from bench.sketches_db import SYNTH
    from bench.sketches_experiments import by_a, q_having
    from bench.sketches_worker import synthetic_events

    n, groups, updates = (2_000, 50, 500) if quick else (50_000, 500, 20_000)
    return Workload(
        "sketches",
        f"Q_having (3 aggregates, {groups} groups): {n:,} inserts then {updates:,} updates (imp)",
        {"query": q_having(3, groups), "relations": SYNTH, "partition": by_a(groups), "strategy": "imp"},
        synthetic_events(n, groups, updates, seed=8),
    )


def _firstorder(quick: bool) -> Workload:
    from bench.firstorder import TRACE, workload

    options, events = workload("axfinder", TRACE, 300 if quick else None)
    return Workload(
        "firstorder",
        f"axfinder over DBToaster's standard finance trace ({len(events):,} events, first-order)",
        {**options, "strategy": "first-order"},
        [encode_event(ev) for ev in events],
    )


BUILDERS: dict[str, Callable[[bool], Workload]] = {
    "reference": _reference,
    "triangles": _triangles,
    "fivm": _fivm,
    "vwap": _vwap,
    "reservoir": _reservoir,
    "sketches": _sketches,
    "firstorder": _firstorder,
}
