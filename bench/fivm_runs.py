"""The F-IVM benchmark's constants and its core: one strategy's engine fed a stream in batches within a
budget, and the strategies of one case compared for equal results.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.fivm_data import HOUSING, round_robin
from bench.lib.progress import progress
from bench.lib.report import REPO
from ivmstream.events import UpdateEvent
from ivmstream.services.fivm.engine import FivmEngine

RESULTS = REPO / "bench" / "results"
BATCH = 1_000
REL_TOL = 1e-9
SERIES_POINTS = 20  # throughput samples along the stream per run
# Short runs are repeated (best of ``runs``) while their total stays below ``below_seconds``.
REPEATS: dict[str, float] = {"runs": 3, "below_seconds": 10.0}

# E4: features spread over the relations, so every relation's leaf lifts something.
FEATURES_6 = (
    "price",
    "pricerangeshop",
    "sizeinstitution",
    "pricerangerest",
    "averagesalary",
    "distancecitycentre",
)
FEATURES_10 = (*FEATURES_6, "livingarea", "openinghoursshop", "unemployment", "nbtrainstations")
FEATURES_27 = tuple(dict.fromkeys(c for cols in HOUSING.values() for c in cols))  # postcode included

TRIANGLE = {
    "R": [{"A": "int"}, {"B": "int"}],
    "S": [{"B": "int"}, {"C": "int"}],
    "T": [{"C": "int"}, {"A": "int"}],
}
MATRIX_CHAIN = {
    "A1": [{"I": "int"}, {"J": "int"}],
    "A2": [{"J": "int"}, {"K": "int"}],
    "A3": [{"K": "int"}, {"L": "int"}],
}

Batches = list[list[UpdateEvent]]


# --- results: equal across strategies ------------------------------------------------------------------


def rel_diff(a: Any, b: Any) -> float:
    """The largest relative difference between two JSON results: 0 when equal, inf on a structural or
    exact (int, str) mismatch, |a-b|/max(1,|a|,|b|) for floats."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return 0.0 if a == b else math.inf
    if isinstance(a, int) and isinstance(b, int):
        return 0.0 if a == b else math.inf
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) / max(1.0, abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return math.inf
        return max((rel_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return math.inf
        return max((rel_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else math.inf


def answer(engine: FivmEngine) -> Any:
    """The result without its diagnostics."""
    out = engine.result()
    out.pop("stats", None)
    return out


# --- one strategy on one stream --------------------------------------------------------------------------


@dataclass
class Stream:
    """Batches of events; the first ``load`` batches load static relations (timed separately)."""

    batches: Batches
    load: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tuples(self) -> int:
        return sum(map(len, self.batches[self.load :]))


def state_size(engine: FivmEngine) -> tuple[int, int]:
    """(entries, bytes) of the engine's state entries (views, supports, metadata): deterministic."""
    entries = nbytes = 0
    for _name, key, value in engine.all_entries():
        entries += 1
        nbytes += len(key) + len(value)
    return entries, nbytes


def run_stream(config: Mapping[str, Any], stream: Stream, budget: float) -> tuple[dict[str, Any], FivmEngine]:
    """Feed ``stream`` to a fresh engine until it ends or ``budget`` seconds of ``apply`` have passed.

    What earlier cases left on the heap is collected and frozen first, so every strategy runs on the
    same clean heap and the collector's passes skip it (a worker holds only its own engines). A smoke
    run (``--quick``) froze its imports before the first case and stays frozen between runs, so each
    collection here walks only what the last run left."""
    smoke = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    try:
        return _run_stream(config, stream, budget)
    finally:
        gc.unfreeze()
        if smoke:
            gc.freeze()


def _run_stream(
    config: Mapping[str, Any], stream: Stream, budget: float
) -> tuple[dict[str, Any], FivmEngine]:
    engine = FivmEngine(config)
    t0 = time.perf_counter()
    for b in stream.batches[: stream.load]:
        rejected = engine.apply(b)
        assert not rejected, rejected[:3]
    load_s = time.perf_counter() - t0
    total = stream.tuples
    step = max(1, total // SERIES_POINTS)
    series: list[list[float]] = []
    done = batches = 0
    elapsed = 0.0
    timed_out = False
    next_mark = step
    for b in stream.batches[stream.load :]:
        t0 = time.perf_counter()
        rejected = engine.apply(b)
        elapsed += time.perf_counter() - t0
        assert not rejected, rejected[:3]
        done += len(b)
        batches += 1
        if done >= next_mark or done == total:
            series.append([done, elapsed])
            next_mark = done + step
        if elapsed > budget and done < total:
            timed_out = True
            break
    entries, nbytes = state_size(engine)
    record = {
        "strategy": config.get("strategy", "fivm"),
        "tuples": total,
        "processed": done,
        "batches": batches,
        "seconds": elapsed,
        "tuples_per_second": done / elapsed if elapsed else None,
        "timed_out": timed_out,
        "load_seconds": load_s if stream.load else None,
        "views": len(engine.maint.views),
        "view_entries": sum(len(v) for v in engine.maint.views.values()),
        "view_sizes": {name: len(v) for name, v in sorted(engine.maint.views.items())},
        "stored_entries": entries,
        "stored_bytes": nbytes,
        "series": series,  # [tuples processed, seconds] along the stream
    }
    return record, engine


def compare_case(
    runs: Mapping[str, Mapping[str, Any]],
    stream: Stream,
    budget: float,
    reference: str,
    check: Callable[[Any], str | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every labelled config on ``stream``; assert every result equals the reference strategy's on
    the same prefix and, for the reference's full run, ``check`` (a closed form or brute force).

    Short runs are then repeated in rounds over the strategies (``REPEATS``; every repeat must give the
    same result) and the fastest is kept: on a shared machine load comes and goes, and rounds spread it
    over the strategies instead of letting it decide the ratio of two one-second runs."""
    out: dict[str, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    ref_cfg = runs[reference]
    ref_answer: Any = None
    ref_batches = -1
    order = [reference, *(label for label in runs if label != reference)]
    for label in order:
        record, engine = run_stream(runs[label], stream, budget)
        got = answers[label] = answer(engine)
        del engine
        record["label"] = label
        if label == reference:
            if record["timed_out"]:
                raise RuntimeError(f"the reference strategy {label} timed out; raise --budget")
            if check is not None:
                problem = check(got)
                if problem:
                    raise AssertionError(f"{label}: {problem}")
            ref_answer, ref_batches = got, record["batches"]
        want = ref_answer
        if record["batches"] != ref_batches or want is None:
            prefix = Stream(stream.batches[: stream.load + record["batches"]], stream.load)
            _, ref_engine = run_stream(ref_cfg, prefix, math.inf)
            want = answer(ref_engine)
            del ref_engine
        diff = rel_diff(got, want)
        if diff > REL_TOL:
            raise AssertionError(
                f"{label} disagrees with {reference} (relative difference {diff}): {got} vs {want}"
            )
        record["max_rel_diff_vs_reference"] = diff
        record["seconds_all"] = [record["seconds"]]
        out[label] = record
    for _round in range(int(REPEATS["runs"]) - 1):
        for label in order:
            rec = out[label]
            if rec["timed_out"] or sum(rec["seconds_all"]) >= REPEATS["below_seconds"]:
                continue
            again, engine = run_stream(runs[label], stream, budget)
            if again["timed_out"]:
                # a busier moment than the first run's: the repeat proves nothing either way, and the
                # first run's time stands
                del engine
                rec["repeat_timed_out"] = True
                continue
            diff = rel_diff(answer(engine), answers[label])
            del engine
            if diff > REL_TOL:
                raise AssertionError(f"a repeat of {label} differs from its first run: {diff}")
            rec["seconds_all"].append(again["seconds"])
            if again["seconds"] < rec["seconds"]:
                for key in ("seconds", "tuples_per_second", "series", "load_seconds"):
                    rec[key] = again[key]
    for label in order:
        record = out[label]
        rate = record["tuples_per_second"] or 0.0
        flag = (
            f" TIMED OUT after {record['processed']:,} of {record['tuples']:,}" if record["timed_out"] else ""
        )
        progress(
            f"    {label:>14}: {rate:>11,.0f} tuples/s, {record['views']} views, "
            f"{record['stored_entries']:,} entries, {record['stored_bytes']:,} B{flag}"
        )
    return {label: out[label] for label in runs}


def events(database: Mapping[str, Sequence[dict[str, Any]]], batch: int = BATCH) -> Batches:
    return [[UpdateEvent(rel, row, d) for row in rows] for rel, rows, d in round_robin(database, batch)]
