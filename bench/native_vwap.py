"""VWAP on DBToaster's finance trace against DBToaster's generated C++: the vwap engine under
``strategy: auto`` with its compiled ledger loop and level tree (services/vwap/_kernels.c), the same
engine on its Python ones, and the batch C++ program DBToaster generates for finance/vwap.sql, on the
same stream.

The stream is the bids side of the order-book trace (finance big: ``bench/data/finance-big.csv``, or
``--trace`` / ``IVMSTREAM_FINANCE_TRACE``), as the worker decodes it, cut into batches of 5,000 and of 1.
Per batch size the three variants run back to back, their order rotating from one repeat to the next:

- **ivmstream** (in this process, a fresh engine per run, the garbage collected before the clock
  starts): ``engine.apply(batch)`` then ``engine.result()`` after every batch, as the worker reads it.
  Decoding the trace and cutting it into batches are not timed. The Python variant is the same engine
  on the Python reference of the ledger loop and the Python trees of the plans, as with
  ``IVMSTREAM_PURE_PYTHON=1``. Timed: the thread's CPU time
  (what a loaded shared machine inflates least) and wall time.
- **C++** (a child process): the driver ``bench/anchors/dbtoaster_vwap.cpp`` reads the same events from a
  file and cuts them into the same batches untimed, then calls the generated batch trigger and reads
  the result after each batch; it reports its process CPU time and wall time over those calls.

Both are single-threaded. Per repeat the ratio is ivmstream's CPU time over the C++'s, then the median.
Every variant must give the same answer after every batch (the sum over batches is compared, and the
final VWAP), or the run fails.

The C++ is never part of this repository: ``bench/anchors/build_dbtoaster_vwap.sh`` builds it from
public sources (docs/performance.md, "VWAP against DBToaster's generated C++"); pass the binary with
``--cpp`` or ``DBTOASTER_VWAP_BIN``. Without it the C++ column is skipped, saying so.

Usage (from the repo root)::

    .venv/bin/python bench/native_vwap.py --cpp PATH      # batches of 5,000 and 1, 3 repeats
    .venv/bin/python bench/native_vwap.py --quick         # smoke sizes (seconds)
    .venv/bin/python bench/native_vwap.py --markdown      # the docs' table from the stored run

Writes ``bench/results/native_vwap.json`` and ``.png`` (``--out X.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.lib.comparison_args import comparison_defaults, comparison_parser  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.report import run_header, store_report  # noqa: E402

OUT = ROOT / "bench" / "results" / "native_vwap.json"
TRACE = ROOT / "bench" / "data" / "finance-big.csv"
TRACE_ENV = "IVMSTREAM_FINANCE_TRACE"
BIN_ENV = "DBTOASTER_VWAP_BIN"
VARIANTS = ("compiled", "python", "cpp")
STRATEGY = "auto"
TIMES = "\u00d7"
GOALS = {5_000: ("at most", 3.0), 1: ("at least", 30.0)}  # ivmstream vs C++: slower by / faster by


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = comparison_parser(__doc__, OUT, cpp_env=BIN_ENV, cpp_help="the generated VWAP binary", child=False)
    p.add_argument(
        "--trace", type=Path, default=None, help=f"finance trace (default: ${TRACE_ENV} or finance big)"
    )
    p.add_argument("--batches", type=int, nargs="+", default=None, help="batch sizes (5,000 1)")
    p.add_argument("--events", type=int, default=None, help="only the first N bids events (all)")
    a = comparison_defaults(p.parse_args(argv), BIN_ENV)
    a.batches = a.batches or ([500, 1] if a.quick else [5_000, 1])
    a.events = a.events or (2_000 if a.quick else None)
    if a.trace is None:
        a.trace = Path(os.environ[TRACE_ENV]) if os.environ.get(TRACE_ENV) else TRACE
    return a


def load_events(trace: Path, limit: int | None) -> list[Any]:
    """The bids events of the trace as the worker decodes them (the first ``limit`` of them)."""
    from ivmstream.events.orderbook import OrderBookAdaptor
    from ivmstream.sdk import UpdateEvent

    adaptor = OrderBookAdaptor(book="bids")
    events: list[Any] = []
    with trace.open() as fh:
        for line in fh:
            for ev in adaptor.feed_line(line):
                events.append(UpdateEvent(ev["relation"], ev["row"], ev["delta"], None))
            if limit and len(events) >= limit:
                return events[:limit]
    return events


def answer_number(value: Any) -> Fraction:
    """The engine's exact answer (an int, or a decimal or fraction string) as a number."""
    return Fraction(value)


# --- ivmstream, in this process ---------------------------------------------------------------------------


def run_engine(batches: list[list[Any]], variant: str) -> dict[str, Any]:
    from ivmstream.services.vwap import kernels
    from ivmstream.services.vwap.engine import VwapEngine

    if variant == "compiled" and kernels.ACTIVE != "compiled":
        raise SystemExit(
            "the compiled vwap kernel is not built (or IVMSTREAM_PURE_PYTHON=1): run `make setup`"
        )
    loop = kernels.compiled.ledger_pass if variant == "compiled" else kernels.py_ledger_pass
    # The engine reads ``kernels.ledger_pass`` per batch and ``kernels.ACTIVE`` when it makes a plan
    # (the crosscheck plan's compiled level tree): both are set as ``IVMSTREAM_PURE_PYTHON`` sets them.
    active = kernels.ledger_pass, kernels.ACTIVE
    kernels.ledger_pass, kernels.ACTIVE = loop, variant
    try:
        engine = VwapEngine("vwap", STRATEGY)
        checksum = Fraction(0)
        gc.collect()
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        for batch in batches:
            engine.apply(batch)
            checksum += answer_number(engine.result()["vwap"])
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
        plan = type(engine.plan).__name__
    finally:
        kernels.ledger_pass, kernels.ACTIVE = active
    events = sum(len(b) for b in batches)
    return {
        "events": events,
        "cpu_s": cpu,
        "wall_s": wall,
        "us_per_event": 1e6 * cpu / events,
        "vwap": str(answer_number(engine.result()["vwap"])),
        "checksum": str(checksum),
        "running": engine.running,
        "plan_class": plan,
        "switches": engine.switches,
    }


# --- the C++ ----------------------------------------------------------------------------------------------


def write_cpp_input(events: list[Any], path: Path) -> None:
    """The driver's input: ``delta t id broker_id volume price`` a line."""
    with path.open("w") as f:
        for ev in events:
            r = ev.row
            f.write(f"{ev.delta} {r['t']} {r['id']} {r['broker_id']} {r['volume']} {r['price']}\n")


def run_cpp(binary: Path, path: Path, batch: int) -> dict[str, Any]:
    proc = subprocess.run([str(binary), str(path), str(batch)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the DBToaster VWAP binary failed: {proc.stderr[-1000:]}")
    got = json.loads(proc.stdout)
    return {
        "events": got["events"],
        "cpu_s": got["cpu_s"],
        "wall_s": got["wall_s"],
        "us_per_event": 1e6 * got["cpu_s"] / got["events"],
        "vwap": got["vwap"],
        "checksum": got["checksum"],
    }


def agree(exact: str, double: float) -> bool:
    """A double answer equals an exact one (to the double's precision)."""
    x = Fraction(exact)
    return abs(Fraction(double) - x) <= abs(x) * Fraction(1, 10**12)


# --- the parent -------------------------------------------------------------------------------------------


def measure_case(a: argparse.Namespace, events: list[Any], batch: int, path: Path | None) -> dict[str, Any]:
    variants = [v for v in VARIANTS if v != "cpp" or path is not None]
    batches = [events[i : i + batch] for i in range(0, len(events), batch)]
    runs: list[dict[str, Any]] = []
    for rep in range(a.repeats):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        for variant in order:
            print(f"batch {batch:,}: {variant} (repeat {rep + 1})", flush=True)
            if variant == "cpp":
                assert path is not None and a.cpp is not None
                got = run_cpp(a.cpp, path, batch)
            else:
                got = run_engine(batches, variant)
            runs.append({"repeat": rep, "variant": variant, "load": load_average()[0], **got})
    exact = {(r["vwap"], r["checksum"]) for r in runs if r["variant"] != "cpp"}
    if len(exact) != 1:
        raise SystemExit(f"batch {batch}: the compiled and Python loops gave different answers: {exact}")
    ((vwap, checksum),) = exact
    for r in runs:
        if r["variant"] == "cpp" and not (agree(vwap, r["vwap"]) and agree(checksum, r["checksum"])):
            raise SystemExit(f"batch {batch}: the C++ answered {r['vwap']}, ivmstream {vwap}")
    by = {v: [r for r in runs if r["variant"] == v] for v in variants}
    case: dict[str, Any] = {
        "batch": batch,
        "events": len(events),
        "batches": len(batches),
        "answers_agree": True,
        "vwap": vwap,
        "running": by["compiled"][-1]["running"],
        "runs": runs,
    }
    for v in variants:
        case[f"{v}_cpu_s_median"] = statistics.median(r["cpu_s"] for r in by[v])
    pairs = zip(by["compiled"], by["python"], strict=True)
    case["kernel_speedups"] = [round(p["cpu_s"] / c["cpu_s"], 3) for c, p in pairs]
    case["kernel_speedup_median"] = statistics.median(case["kernel_speedups"])
    if "cpp" in by:
        for v in ("compiled", "python"):
            ratios = [e["cpu_s"] / c["cpu_s"] for c, e in zip(by["cpp"], by[v], strict=True)]
            case[f"{v}_over_cpp"] = [round(x, 4) for x in ratios]
            case[f"{v}_over_cpp_median"] = statistics.median(ratios)
    return case


def _ratio(x: float) -> str:
    """ivmstream time / C++ time in words: slower by x, or faster by 1/x."""
    return f"{x:.1f}{TIMES} the C++'s time" if x >= 1 else f"{1 / x:.0f}{TIMES} faster"


def _goal(batch: int, x: float) -> str:
    if batch not in GOALS:
        return ""
    kind, bound = GOALS[batch]
    met = x <= bound if kind == "at most" else 1 / x >= bound
    target = f"≤ {bound:g}{TIMES} the C++'s time" if kind == "at most" else f"≥ {bound:g}{TIMES} faster"
    return f"{target}: {'met' if met else 'not met'}"


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    cpp = cfg["cpp"]
    lines = [
        f"Run of `{report['command']}`, created {report['created']}; load average "
        f"{report['load_start'][0]:.1f} at the start, {report['load_end'][0]:.1f} at the end (2 cores). "
        f"VWAP (`strategy: {STRATEGY}`) over the bids of `{cfg['trace']}` ({report['cases'][0]['events']:,} "
        f"events), the answer read after every batch. Medians of {cfg['repeats']} interleaved repeats, "
        "milliseconds of CPU time for the whole stream (engine only: decoding and batching untimed); the "
        "ratios are the medians of the per-repeat ratios."
        + ("" if cpp else " The C++ binary was not given: its columns are left out."),
        "",
    ]
    head = "| batch | plan run | ivmstream compiled (ms) | ivmstream Python (ms) | compiled / Python |"
    rule = "|---|---|---|---|---|"
    if cpp:
        head += " DBToaster C++ (ms) | compiled vs C++ | Python vs C++ | goal |"
        rule += "---|---|---|---|"
    lines += [head, rule]
    for c in report["cases"]:
        row = (
            f"| {c['batch']:,} | {c['running']} | {1e3 * c['compiled_cpu_s_median']:,.1f} | "
            f"{1e3 * c['python_cpu_s_median']:,.1f} | {c['kernel_speedup_median']:.2f}{TIMES} faster |"
        )
        if cpp:
            x = c["compiled_over_cpp_median"]
            py = c["python_over_cpp_median"]
            cpp_ms = 1e3 * c["cpp_cpu_s_median"]
            row += f" {cpp_ms:,.1f} | **{_ratio(x)}** | {_ratio(py)} | {_goal(c['batch'], x)} |"
        lines.append(row)
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    from bench.lib.plots import plt

    cases = report["cases"]
    labels = [f"batch {c['batch']:,}" for c in cases]
    variants = [v for v in VARIANTS if f"{v}_cpu_s_median" in cases[0]]
    names = {
        "compiled": "ivmstream auto, compiled",
        "python": "ivmstream auto, Python",
        "cpp": "DBToaster C++",
    }
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(variants)
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(cases))]
        ax.bar(xs, [1e3 * c[f"{v}_cpu_s_median"] for c in cases], width, label=names[v])
    ax.set_xticks(range(len(cases)), labels)
    ax.set_ylabel("ms of CPU time, whole stream")
    ax.set_yscale("log")
    ax.set_title("VWAP on the finance trace: ivmstream against DBToaster's C++")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    if a.markdown is not None:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    if a.cpp is not None and not os.access(a.cpp, os.X_OK):
        raise SystemExit(f"--cpp {a.cpp}: not an executable file")
    if not a.trace.is_file():
        raise SystemExit(f"finance trace {a.trace} not found (--trace or {TRACE_ENV})")
    if a.cpp is None:
        print(f"DBToaster's C++ is skipped: no binary given (--cpp or {BIN_ENV})", flush=True)
    out = a.out.with_suffix(".json") if a.out else OUT
    started = time.time()
    load_start = load_average()
    events = load_events(a.trace, a.events)
    with tempfile.TemporaryDirectory(prefix="ivmstream-vwap-") as tmp:
        path = None
        if a.cpp is not None:
            path = Path(tmp) / "bids.txt"
            write_cpp_input(events, path)
        cases = [measure_case(a, events, batch, path) for batch in a.batches]
    report = {
        **run_header("bench/native_vwap.py", list(argv) if argv is not None else None, started),
        "config": {
            "trace": a.trace.name,
            "events": len(events),
            "batches": a.batches,
            "repeats": a.repeats,
            "strategy": STRATEGY,
            "quick": a.quick,
            "cpp": a.cpp is not None,
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
