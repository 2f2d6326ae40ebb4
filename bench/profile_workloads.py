"""The workloads the profiles run: each engine's hot path on the input its own benchmark uses, as the
native-speed comparison states it (engine only, in-process, events decoded before the clock starts).

A case builds its engine, applies a warm-up part untimed (triangles' BUILD), and hands over the timed
batches; ``read`` is called after every batch where the service's worker reads a result per batch.
Sizes come in two scales: ``full`` (the comparison's workloads, cut by a time budget) and ``quick`` (a
smoke run of a few seconds in all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ivmstream.events import UpdateEvent

Batch = list[UpdateEvent]


@dataclass
class Prepared:
    """An engine ready for its timed part: the batches it applies and what the worker reads after each."""

    engine: Any
    batches: list[Batch]
    read: Callable[[], Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    name: str  # the profile's file name
    engine: str  # the service
    workload: str  # what the docs call it
    prepare: Callable[[bool, Path], Prepared]  # (quick, vwap trace) -> the engine and its batches


def _chunks(events: Sequence[UpdateEvent], size: int) -> list[Batch]:
    return [list(events[i : i + size]) for i in range(0, len(events), size)]


# --- reservoir: RSJoin and SJoin on line-3 -------------------------------------------------------------


def _reservoir(strategy: str, edges: int, quick_edges: int, k: int) -> Callable[[bool, Path], Prepared]:
    def prepare(quick: bool, _trace: Path) -> Prepared:
        from bench.reservoir_graphs import epinions_like, line, stream_for
        from ivmstream.options import parse_options
        from ivmstream.services.reservoir.engine import ReservoirEngine
        from ivmstream.services.reservoir.options import OPTIONS

        n = quick_edges if quick else edges
        query = line(3, k, strategy)
        events = stream_for(query, epinions_like(n, seed=1))
        engine = ReservoirEngine(parse_options(OPTIONS, query, owner="bench"))
        return Prepared(engine, _chunks(events, 500), meta={"edges": n, "k": k, "query": "line-3"})

    return prepare


# --- fivm: covariance over the 27 Housing variables ------------------------------------------------------


def _fivm(quick: bool, _trace: Path) -> Prepared:
    from bench.fivm_data import housing, housing_config
    from bench.fivm_runs import BATCH, FEATURES_27, events
    from ivmstream.services.fivm.engine import FivmEngine

    postcodes = 300 if quick else 25_000
    engine = FivmEngine(housing_config("covariance", FEATURES_27))
    batches = events(housing(1, postcodes, seed=1), batch=BATCH)
    return Prepared(
        engine, batches, meta={"scale": 1, "postcodes": postcodes, "batch": BATCH, "variables": 27}
    )


# --- vwap: the finance order book ------------------------------------------------------------------------


class _Rounds:
    """The trace replayed on fresh engines, one per round, so that a trace of a few batches still fills
    the time budget; every round starts on an empty book, as the trace does."""

    def __init__(self, engines: list[Any], batches_per_round: int) -> None:
        self.engines = engines
        self.per_round = batches_per_round
        self.applied = 0

    def apply(self, batch: Sequence[Any]) -> Any:
        engine = self.engines[self.applied // self.per_round]
        self.applied += 1
        return engine.apply(batch)

    def result(self) -> Any:
        return self.engines[(self.applied - 1) // self.per_round].result()


def _vwap(strategy: str, batch: int, rounds: int = 1) -> Callable[[bool, Path], Prepared]:
    def prepare(quick: bool, trace: Path) -> Prepared:
        from bench.vwap_engines import load_trace
        from ivmstream.services.vwap.engine import VwapEngine

        events = [UpdateEvent(rel, row, m, None) for rel, row, m in load_trace(trace, "bids")]
        size = batch if not quick else min(batch, 500)
        if quick:
            events = events[:2_000]
        meta = {"query": "vwap", "book": "bids", "batch": size, "trace": trace.name}
        batches = _chunks(events, size)
        if rounds == 1:
            engine = VwapEngine("vwap", strategy)
            return Prepared(engine, batches, read=engine.result, meta=meta)
        replay = _Rounds([VwapEngine("vwap", strategy) for _ in range(rounds)], len(batches))
        return Prepared(replay, batches * rounds, read=replay.result, meta={**meta, "rounds": rounds})

    return prepare


# --- triangles: graph churn after a BUILD ----------------------------------------------------------------


def _triangles(strategy: str, batch: int) -> Callable[[bool, Path], Prepared]:
    def prepare(quick: bool, _trace: Path) -> Prepared:
        from bench import triangles_workloads as wl
        from ivmstream.services.triangles.engine import create_engine

        warm_edges = 2_000 if quick else 50_000
        churn_steps = 2_000 if quick else 100_000
        triples, _meta = wl.graph_churn_events(warm=warm_edges, churn=churn_steps, seed=5)
        warm = sorted({(min(u, v), max(u, v)) for u, v, _ in triples[:warm_edges]})
        churn = [UpdateEvent("edges", {"src": u, "dst": v}, m) for u, v, m in triples[warm_edges:]]
        engine = create_engine("graph", strategy)
        engine.load(warm)
        return Prepared(
            engine,
            _chunks(churn, batch),
            read=engine.result,
            meta={"workload": "G-churn", "warm_edges": warm_edges, "batch": batch},
        )

    return prepare


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            "reservoir-rsjoin",
            "reservoir",
            "RSJoin line-3, 50,000 edges, k = 1,000",
            _reservoir("rsjoin", 50_000, 600, 1_000),
        ),
        Case(
            "reservoir-sjoin",
            "reservoir",
            "SJoin line-3, 20,000 edges, k = 1,000",
            _reservoir("sjoin", 20_000, 300, 1_000),
        ),
        Case("fivm-covariance", "fivm", "Housing-1 covariance over 27 variables, batches of 1,000", _fivm),
        Case(
            "vwap-auto-b5000",
            "vwap",
            "VWAP (auto), finance trace (bids) replayed on 20 fresh engines, batch 5,000",
            _vwap("auto", 5_000, rounds=20),
        ),
        Case(
            "vwap-dbtoaster-b5000",
            "vwap",
            "VWAP (dbtoaster), finance trace (bids) replayed on 20 fresh engines, batch 5,000",
            _vwap("dbtoaster", 5_000, rounds=20),
        ),
        Case("vwap-auto-b1", "vwap", "VWAP (auto), finance trace (bids), batch 1", _vwap("auto", 1)),
        Case(
            "triangles-auto",
            "triangles",
            "graph churn after a 50,000-edge BUILD (auto), batch 100",
            _triangles("auto", 100),
        ),
        Case(
            "triangles-ivm-eps",
            "triangles",
            "graph churn after a 50,000-edge BUILD (ivm-eps 1/2), batch 100",
            _triangles("ivm-eps", 100),
        ),
    )
}
