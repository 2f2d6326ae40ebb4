"""Where each engine's time goes per tuple: the hot path of every engine on its comparison workload,
engine only and in-process (events decoded before the clock starts), timed, profiled and flame-graphed.

Per case (``bench/profile_workloads.py``: RSJoin and SJoin on line-3, F-IVM's Housing covariance over
27 variables in batches of 1,000, VWAP on the finance trace at batch 5,000 (auto, dbtoaster; the trace
replayed on 20 fresh engines, as it holds only 10 such batches) and 1 (auto), triangles' graph churn
(auto, ivm-eps)), one child process

1. prepares the engine and its batches (data generation, trace decoding, BUILD: untimed);
2. applies the batches without a profiler until they end or ``--budget`` seconds pass: **µs per tuple**
   (total time / tuples, results read after each batch where the worker reads them), in wall time and
   in the process's CPU time (which the machine's other load does not inflate). When py-spy is
   installed it is attached (non-blocking sampling) for this part and writes the flame graph
   ``bench/results/profiles/<case>.svg``;
3. applies the same batches to a fresh engine under cProfile: the top functions and source files by
   self time, their share scaled onto the unprofiled CPU µs per tuple, and calls per tuple (exact). A
   compiled kernel's time is credited to its C source (``_kernels.c``, or the extension's file named
   after it) and summed as the case's compiled share; the flame graph shows it under the Python line
   that calls the kernel (py-spy's native unwinding would pause the process).

``--quick`` runs every case in this process instead (no flame graphs): a smoke run of a few seconds.

Usage (from the repo root)::

    .venv/bin/python bench/profiles.py                 # every case (a few minutes)
    .venv/bin/python bench/profiles.py --cases vwap-auto-b5000,fivm-covariance
    .venv/bin/python bench/profiles.py --quick         # smoke sizes, cProfile only, a few seconds
    .venv/bin/python bench/profiles.py --markdown      # the docs' tables from the stored summary

Writes ``bench/results/profiles/summary.json`` (``--out X.json`` writes X.json and puts flame graphs in
X's folder) and the flame graphs beside it.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.report import command_line, shown  # noqa: E402
from bench.profile_workloads import CASES  # noqa: E402

OUT = ROOT / "bench" / "results" / "profiles" / "summary.json"
TRACE_ENV = "IVMSTREAM_FINANCE_TRACE"
DEFAULT_TRACE = ROOT / "bench" / "data" / "finance-big.csv"
TOP_IN_DOCS = 6


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke sizes, no flame graphs (a few seconds)")
    p.add_argument("--markdown", nargs="?", const=str(OUT), default=None, metavar="JSON")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    p.add_argument(
        "--budget", type=float, default=None, help="seconds of timed apply per case (8; quick 0.5)"
    )
    p.add_argument(
        "--trace",
        type=Path,
        default=Path(os.environ.get(TRACE_ENV, DEFAULT_TRACE)),
        help=f"the finance order-book trace (default ${TRACE_ENV} or bench/data/finance-big.csv)",
    )
    p.add_argument("--no-flamegraph", action="store_true", help="skip py-spy even where it is installed")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = [c for c in args.cases.split(",") if c and c not in CASES]
    if unknown:
        p.error(f"unknown case {unknown[0]!r} (known: {', '.join(CASES)})")
    if args.budget is None:
        args.budget = 0.5 if args.quick else 8.0
    return args


# --- the child: one case ---------------------------------------------------------------------------------


def _handshake(message: str) -> None:
    """Tell the parent where the child is and wait for its go (py-spy attaches or detaches meanwhile)."""
    print(message, flush=True)
    sys.stdin.readline()


def profile_case(name: str, args: argparse.Namespace, pause: Callable[[str], None]) -> dict[str, Any]:
    """One case: prepare, the timed run (``pause`` before and after it: py-spy attaches and detaches),
    then the cProfile run of the same batches on a fresh engine."""
    from bench.lib.profiling import cprofile, hot_path, settle, summarize

    case = CASES[name]
    prepared = case.prepare(args.quick, args.trace)
    settle()
    pause("ready")
    load_before = load_average()
    cpu_start = time.process_time()  # all its threads (numpy's too); the other processes' load is not in it
    applied, tuples, seconds = hot_path(prepared.engine.apply, prepared.batches, prepared.read, args.budget)
    cpu_seconds = time.process_time() - cpu_start
    pause("timed")
    us = 1e6 * seconds / tuples
    cpu_us = 1e6 * cpu_seconds / tuples
    meta = prepared.meta
    del prepared
    fresh = case.prepare(args.quick, args.trace)
    settle()
    stats = cprofile(fresh.engine.apply, fresh.batches[:applied], fresh.read)
    gc.unfreeze()
    return {
        "case": case.name,
        "engine": case.engine,
        "workload": case.workload,
        "meta": meta,
        "kernels": importlib.import_module(f"ivmstream.services.{case.engine}.kernels").ACTIVE,
        "batches": applied,
        "tuples": tuples,
        "seconds": round(seconds, 4),
        "us_per_tuple": round(us, 3),
        "cpu_seconds": round(cpu_seconds, 4),
        "cpu_us_per_tuple": round(cpu_us, 3),
        "tuples_per_second": round(tuples / seconds, 1),
        "load_before": load_before,
        "load_after": load_average(),
        **summarize(stats, tuples, cpu_us),
    }


def child(args: argparse.Namespace) -> int:
    record = profile_case(args.child, args, _handshake)
    print("RESULT " + json.dumps(record), flush=True)
    return 0


# --- the parent: every case in a child, py-spy attached to the timed part --------------------------------


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def run_case(name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--budget",
        str(args.budget),
        "--trace",
        str(args.trace),
    ]
    if args.quick:
        cmd.append("--quick")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None
    spy = _py_spy() if not (args.quick or args.no_flamegraph) else None
    svg = folder / f"{name}.svg"
    sampler = None
    result: dict[str, Any] | None = None
    for line in proc.stdout:
        if line.startswith("ready"):
            if spy:
                sampler = subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(proc.pid),
                        "--nonblocking",
                        "--rate",
                        "250",
                        "--format",
                        "flamegraph",
                        "--output",
                        str(svg),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.5)  # py-spy attaches
            proc.stdin.write("go\n")
            proc.stdin.flush()
        elif line.startswith("timed"):
            if sampler is not None:
                sampler.send_signal(signal.SIGINT)  # py-spy writes the flame graph on interrupt
                sampler.wait(timeout=60)
            proc.stdin.write("go\n")
            proc.stdin.flush()
        elif line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    if proc.wait() != 0 or result is None:
        raise SystemExit(f"profile case {name} failed (exit {proc.returncode})")
    result["flamegraph"] = None
    if sampler is not None and svg.exists():
        portable(svg, spy or "py-spy")
        result["flamegraph"] = shown(svg)
    return result


def portable(svg: Path, spy: str) -> None:
    """The flame graph's title names the command that made it: without this machine's paths."""
    text = svg.read_text()
    svg.write_text(text.replace(spy, "py-spy").replace(f"{ROOT}/", ""))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    if args.markdown is not None:
        from bench.profiles_report import markdown

        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if any(CASES[c].engine == "vwap" for c in args.cases.split(",") if c) and not args.trace.is_file():
        raise SystemExit(f"trace not found: {args.trace} (--trace or ${TRACE_ENV})")
    out = args.out.with_suffix(".json") if args.out else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    load_start = load_average()
    cases = []
    for name in [c for c in args.cases.split(",") if c]:
        print(f"profiling {name}", flush=True)
        if args.quick:  # no flame graph: every case in this process (one interpreter start, one import each)
            record = {**profile_case(name, args, lambda _stage: None), "flamegraph": None}
        else:
            record = run_case(name, args, out.parent)
        print(
            f"  {record['tuples']:,} tuples, {record['us_per_tuple']:.1f} µs/tuple "
            f"({record['cpu_us_per_tuple']:.1f} µs of CPU)",
            flush=True,
        )
        cases.append(record)
    report = {
        "command": command_line("bench/profiles.py", list(argv) if argv is not None else None),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "wall_seconds": round(time.time() - started, 1),
        "quick": args.quick,
        "budget_seconds": args.budget,
        "load_start": load_start,
        "load_end": load_average(),
        "machine": machine_info(),
        "cases": cases,
    }
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {shown(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
