"""The vwap benchmark's TPC-H Q17 runs on generated data (``bench/tpch_gen.py``), uniform and skewed."""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.vwap_engines import Event, answer
from ivmstream.services.vwap.catalog import QUERIES
from ivmstream.services.vwap.exact import exact_context
from ivmstream.services.vwap.plans import make_plan


def plan_for(query: str, strategy: str) -> Any:
    return make_plan(query, strategy, dict(QUERIES[query].defaults))


def timed_prefix(query: str, strategy: str, events: Sequence[Event], budget: float) -> dict[str, Any]:
    """Update + result per event from the start, until the events or ``budget`` seconds run out."""
    plan = plan_for(query, strategy)
    gc.collect()
    n = 0
    with exact_context():
        t0 = time.perf_counter()
        deadline = t0 + budget
        for rel, row, m in events:
            plan.update(rel, row, m)
            plan.result()
            n += 1
            if not n % 1000 and time.perf_counter() > deadline:
                break
        dt = time.perf_counter() - t0
        final = answer(plan.result())
    return {"events": n, "seconds": dt, "updates_per_s": n / dt, "final": final}


def tpch_suite(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """Q17 over generated TPC-H data: lineitem and part interleaved in proportion, inserts only."""
    from bench import tpch_gen
    from ivmstream.events import EventCodec, Schema
    from ivmstream.events.tpch import interleave_tpch

    codec = EventCodec(Schema.of(*QUERIES["q17"].relations))

    out: dict[str, Any] = {}
    problems: list[str] = []
    for skew in (False, True):
        label = "skewed" if skew else "uniform"
        out[label] = []
        for sf in args.tpch_sfs:
            with tempfile.TemporaryDirectory() as tmp:
                tpch_gen.generate(Path(tmp), sf=sf, skew="skewed" if skew else "uniform", seed=7)
                events = []
                for _rel, rec in interleave_tpch([Path(tmp) / "part.tbl", Path(tmp) / "lineitem.tbl"]):
                    ev = codec.decode(rec.value)
                    events.append((ev.relation, ev.row, ev.delta))
            row: dict[str, Any] = {"sf": sf, "events": len(events)}
            # The baseline first, within the budget; rpai then runs exactly the prefix the baseline reached
            # (and the whole trace), so the ratio compares equal work.
            base = timed_prefix("q17", "dbtoaster", events, args.tpch_budget)
            n = base["events"]
            fast = timed_prefix("q17", "rpai", events[:n], float("inf"))
            whole = fast if n == len(events) else timed_prefix("q17", "rpai", events, float("inf"))
            row["measured_events"] = n
            row["dbtoaster"] = {"seconds": base["seconds"], "updates_per_s": base["updates_per_s"]}
            row["rpai"] = {"seconds": fast["seconds"], "updates_per_s": fast["updates_per_s"]}
            row["rpai_whole_trace"] = {"seconds": whole["seconds"], "updates_per_s": whole["updates_per_s"]}
            row["ratio"] = base["seconds"] / fast["seconds"]
            if base["final"] != fast["final"]:
                problems.append(f"q17 {label} sf={sf} at {n}: {base['final']} != {fast['final']}")
            rp, db = fast["updates_per_s"], base["updates_per_s"]
            print(
                f"  q17 {label:<8} sf={sf:<5} events={n:>7}/{len(events):<7} rpai {rp:,.0f}/s "
                f"dbtoaster {db:,.0f}/s ratio {row['ratio']:.2f}",
                flush=True,
            )
            out[label].append(row)
    return out, problems
