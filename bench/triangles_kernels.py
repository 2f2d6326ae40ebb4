"""What the compiled triangle kernels buy: the same workload with the compiled loops
(services/triangles/_kernels.c) and graph batch path (services/triangles/_graph_kernels.c) and with their
Python reference (``IVMSTREAM_PURE_PYTHON=1``), engine only and through the worker, in interleaved
repeats.

Each measurement is a child process (the kernels are chosen at import), the two variants alternating
and their order rotating from one repeat to the next:

1. **engine**: graph churn (``graph_churn_events``) after a BUILD of ``--warm`` edges, ``--churn`` events
   applied with ``engine.apply`` in batches of ``--batch``, the count read after each batch (as the worker
   does), per strategy (auto, ivm-eps): **µs per event**, in the thread's CPU time (which the load of a
   shared machine inflates least) and in wall time;
2. **worker**: the same kind of stream (``--worker-events``: half inserts, then churn) through a real
   ``Worker`` with RocksDB state on the embedded broker (``bench/triangles_e2e.py``), timed from group
   assignment to the final checkpoint, its published count checked against a brute-force count:
   **events per second**.

Ratios are per repeat (python / compiled time, compiled / python events per second), then the median.

Usage (from the repo root)::

    .venv/bin/python bench/triangles_kernels.py            # a few minutes
    .venv/bin/python bench/triangles_kernels.py --quick    # smoke sizes
    .venv/bin/python bench/triangles_kernels.py --markdown # the docs' table from the stored run

Writes ``bench/results/triangles_kernels.json`` and ``.png`` (``--out X.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.lib.comparison_args import comparison_defaults, comparison_parser  # noqa: E402
from bench.lib.kernel_children import print_result, run_variant  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.report import run_header, store_report  # noqa: E402

OUT = ROOT / "bench" / "results" / "triangles_kernels.json"
STRATEGIES = ("auto", "ivm-eps")
VARIANTS = ("compiled", "python")
TIMES = "\u00d7"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = comparison_parser(__doc__, OUT, child=False)
    p.add_argument("--warm", type=int, default=None, help="edges loaded by BUILD (engine; 20,000)")
    p.add_argument("--churn", type=int, default=None, help="churn events timed (engine; 40,000)")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--worker-events", type=int, default=None, help="events through the worker (30,000)")
    p.add_argument("--no-worker", action="store_true")
    p.add_argument("--child", choices=("engine", "worker"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--strategy", default="auto", help=argparse.SUPPRESS)
    a = comparison_defaults(p.parse_args(argv))
    a.warm = a.warm or (500 if a.quick else 20_000)
    a.churn = a.churn or (500 if a.quick else 40_000)
    a.worker_events = a.worker_events or (600 if a.quick else 30_000)
    return a


def active_kernels() -> str:
    """``compiled`` or ``python`` when both the loops (kernels.py) and the graph batch path
    (simple_graph.py) run that way, else ``mixed`` (the parent then refuses the run)."""
    from ivmstream.services.triangles import kernels, simple_graph

    return kernels.ACTIVE if kernels.ACTIVE == simple_graph.ACTIVE else "mixed"


# --- children ---------------------------------------------------------------------------------------------


def engine_child(a: argparse.Namespace) -> dict[str, Any]:
    from bench import triangles_workloads as wl
    from bench.lib.profiling import hot_path, settle
    from ivmstream.events import UpdateEvent
    from ivmstream.services.triangles.engine import create_engine

    triples, _meta = wl.graph_churn_events(warm=a.warm, churn=a.churn, seed=5)
    warm = sorted({(min(u, v), max(u, v)) for u, v, _ in triples[: a.warm]})
    churn = [UpdateEvent("edges", {"src": u, "dst": v}, m) for u, v, m in triples[a.warm :]]
    engine = create_engine("graph", a.strategy)
    engine.load(warm)
    batches = [churn[i : i + a.batch] for i in range(0, len(churn), a.batch)]
    settle()
    cpu0 = time.thread_time()
    _done, events, seconds = hot_path(engine.apply, batches, engine.result, float("inf"))
    cpu = time.thread_time() - cpu0  # this thread's CPU time: what the shared machine's load inflates least
    return {
        "kernels": active_kernels(),
        "events": events,
        "seconds": seconds,
        "us_per_event": 1e6 * seconds / events,
        "cpu_us_per_event": 1e6 * cpu / events,
        "result": {k: v for k, v in engine.result().items() if k != "stats"},
    }


def worker_child(a: argparse.Namespace) -> dict[str, Any]:
    import shutil
    import tempfile
    import uuid

    from bench import triangles_workloads as wl
    from bench.triangles_e2e import run_e2e
    from ivmstream.dev.broker import BrokerProcess

    half = a.worker_events // 2
    triples, meta = wl.graph_churn_events(warm=half, churn=a.worker_events - half, seed=5)
    broker = BrokerProcess()
    state_dir = tempfile.mkdtemp(prefix="ivmstream-tri-kernels-")
    try:
        broker.start()
        case = run_e2e("graph-churn", triples, meta, broker, uuid.uuid4().hex[:8], state_dir, a.strategy)
    finally:
        broker.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
    if not case["count_ok"]:
        raise SystemExit(f"the worker's count disagrees with the brute-force count: {case['counts']}")
    return {
        "kernels": active_kernels(),
        "events": case["events"],
        "seconds": case["seconds"],
        "events_per_s": case["updates_per_s"],
        "engine_only_events_per_s": case["engine_only_updates_per_s"],
    }


# --- the parent -------------------------------------------------------------------------------------------


def run_child(kind: str, strategy: str, variant: str, a: argparse.Namespace) -> dict[str, Any]:
    args = [kind, "--strategy", strategy, "--warm", str(a.warm), "--churn", str(a.churn)]
    args += ["--batch", str(a.batch), "--worker-events", str(a.worker_events)]
    got = run_variant(__file__, args, variant, f"{kind} {strategy}", ROOT)
    return {**got, "load": load_average()[0]}


def summarize(runs: list[dict[str, Any]], key: str, higher_is_better: bool) -> dict[str, Any]:
    by = {v: [r for r in runs if r["variant"] == v] for v in VARIANTS}
    ratios = []
    for c, p in zip(by["compiled"], by["python"], strict=True):
        ratios.append(c[key] / p[key] if higher_is_better else p[key] / c[key])
    answers = {json.dumps(r["result"], sort_keys=True) for r in runs if "result" in r}
    if len(answers) > 1:  # the engine runs apply the same events: their counts must be equal
        raise SystemExit(f"the compiled and Python kernels disagree: {sorted(answers)}")
    return {
        "results_agree": True,
        **{f"{v}_{key}_median": statistics.median(r[key] for r in by[v]) for v in VARIANTS},
        "speedups": [round(x, 3) for x in ratios],
        "speedup_median": round(statistics.median(ratios), 3),
    }


# (label, child, figure, higher is better): the engine runs give wall and CPU time, the worker events/s
FIGURES = (
    ("engine, thread CPU time", "engine", "cpu_us_per_event", False),
    ("engine, wall time", "engine", "us_per_event", False),
    ("worker, wall time", "worker", "events_per_s", True),
)


def measure(a: argparse.Namespace) -> dict[str, Any]:
    kinds = ["engine"] + ([] if a.no_worker else ["worker"])
    out: dict[str, Any] = {}
    for kind in kinds:
        for strategy in STRATEGIES:
            runs = []
            for rep in range(a.repeats):
                order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
                for variant in order:
                    print(f"{kind} {strategy} {variant} (repeat {rep + 1})", flush=True)
                    runs.append({"repeat": rep, "variant": variant, **run_child(kind, strategy, variant, a)})
            for label, child, key, higher in FIGURES:
                if child == kind:
                    out[f"{label}|{strategy}"] = {
                        "kind": label,
                        "figure": key,
                        "strategy": strategy,
                        "runs": runs,
                        **summarize(runs, key, higher),
                    }
    return out


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [
        f"Run of `{report['command']}`, created {report['created']}; load average "
        f"{report['load_start'][0]:.1f} at the start, {report['load_end'][0]:.1f} at the end. Graph churn "
        f"after a BUILD of {cfg['warm']:,} edges, {cfg['churn']:,} events in batches of {cfg['batch']} "
        f"(engine); {cfg['worker_events']:,} events through the worker. Medians of {cfg['repeats']} "
        "interleaved repeats; the speed-up is the median of the per-repeat ratios.",
        "",
        "| measured | strategy | compiled kernels | Python loops | speed-up (per repeat) |",
        "|---|---|---|---|---|",
    ]
    for case in report["cases"].values():
        key = case["figure"]
        c, p = case[f"compiled_{key}_median"], case[f"python_{key}_median"]
        if key == "events_per_s":
            cells = f"{c:,.0f} events/s | {p:,.0f} events/s"
        else:
            cells = f"{c:.1f} µs/event | {p:.1f} µs/event"
        each = ", ".join(f"{x:.2f}" for x in case["speedups"])
        speedup = f"**{case['speedup_median']:.2f}{TIMES}** ({each})"
        lines.append(f"| {case['kind']} | {case['strategy']} | {cells} | {speedup} |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    from bench.lib.plots import plt

    cases = list(report["cases"].values())
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{c['kind']}\n{c['strategy']}" for c in cases]
    ax.bar(labels, [c["speedup_median"] for c in cases], color="#4c72b0")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("compiled kernels: speed-up (median)")
    ax.set_title("triangles: compiled kernels against the Python loops")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    if a.child:
        got = engine_child(a) if a.child == "engine" else worker_child(a)
        print_result(got)
        return 0
    if a.markdown is not None:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    out = a.out.with_suffix(".json") if a.out else OUT
    started = time.time()
    load_start = load_average()
    cases = measure(a)
    report = {
        **run_header("bench/triangles_kernels.py", list(argv) if argv is not None else None, started),
        "config": {
            "warm": a.warm,
            "churn": a.churn,
            "batch": a.batch,
            "worker_events": a.worker_events,
            "repeats": a.repeats,
            "quick": a.quick,
        },
        "load_start": load_start,
        "load_end": load_average(),
        "machine": machine_info(),
        "cases": cases,
    }
    store_report(report, out, plot, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
