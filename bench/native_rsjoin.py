"""RSJoin on line-3 against the authors' C++: the reservoir engine with its compiled re-weighing
(services/reservoir/_kernels.c), the same engine on its Python steps (``IVMSTREAM_PURE_PYTHON=1``), and
the RSJoin paper's own program (``Reservoir line_join 3 FILE k``), on the same input stream.

The stream is the paper's: every edge of an Epinions-like graph (``bench/reservoir_graphs.py``) once in
each of the three relations, all copies shuffled together. Per case (edges, k), the three variants run
back to back in child processes, their order rotating from one repeat to the next:

- **ivmstream**: the engine built, then the stream applied with ``engine.apply`` in batches of 500,
  in-process; the graph, the events and the engine's construction are not timed. Timed: the thread's CPU
  time (what a loaded shared machine inflates least) and wall time; the garbage collector's share of the
  CPU time is recorded (``gc.callbacks``).
- **C++**: the binary reads the same stream from a file in its own format; timed: the child process's
  CPU time (``RUSAGE_CHILDREN``, reading and parsing included) and the run time the program prints.

Both are single-threaded. The ratio is C++ tuples/s over ivmstream tuples/s (CPU time) per repeat, then
the median. The compiled and Python runs must draw the same sample (same seed), or the run fails.

The C++ is never part of this repository: build it from the authors' repository (docs/performance.md,
"RSJoin against the authors' C++") and pass the binary with ``--cpp`` or ``RSJOIN_BIN``; without it the
C++ column is skipped, saying so.

Usage (from the repo root)::

    .venv/bin/python bench/native_rsjoin.py --cpp PATH     # 50K and 200K edges, k = 1,000 and 100,000
    .venv/bin/python bench/native_rsjoin.py --quick        # smoke sizes (seconds)
    .venv/bin/python bench/native_rsjoin.py --markdown     # the docs' table from the stored run

Writes ``bench/results/native_rsjoin.json`` and ``.png`` (``--out X.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
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
from bench.lib.line3_report import (  # noqa: E402
    add_ratios,
    interleaved_runs,
    plot_cases,
    run_and_store,
    sample_digest,
    timed_apply,
)

OUT = ROOT / "bench" / "results" / "native_rsjoin.json"
BIN_ENV = "RSJOIN_BIN"
VARIANTS = ("compiled", "python", "cpp")
BATCH = 500
GRAPH_SEED = 1
TIMES = "\u00d7"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = comparison_parser(__doc__, OUT, cpp_env=BIN_ENV, cpp_help="the RSJoin binary")
    p.add_argument("--edges", type=int, nargs="+", default=None, help="graph sizes (50,000 200,000)")
    p.add_argument("--k", type=int, nargs="+", default=None, help="sample sizes (1,000 100,000)")
    a = comparison_defaults(p.parse_args(argv), BIN_ENV)
    a.edges = a.edges or ([300] if a.quick else [50_000, 200_000])
    a.k = a.k or ([50] if a.quick else [1_000, 100_000])
    return a


def stream(edges: int, k: int) -> tuple[dict[str, Any], list[Any]]:
    from bench.reservoir_graphs import epinions_like, line, stream_for

    query = line(3, k, "rsjoin")
    return query, stream_for(query, epinions_like(edges, seed=GRAPH_SEED))


# --- the ivmstream child ----------------------------------------------------------------------------------


def engine_child(edges: int, k: int) -> dict[str, Any]:
    from ivmstream.options import parse_options
    from ivmstream.services.reservoir import kernels
    from ivmstream.services.reservoir.engine import ReservoirEngine
    from ivmstream.services.reservoir.options import OPTIONS

    query, events = stream(edges, k)
    engine = ReservoirEngine(parse_options(OPTIONS, query, owner="bench"))
    batches = [events[i : i + BATCH] for i in range(0, len(events), BATCH)]
    timing = timed_apply(engine, batches)
    size, digest = sample_digest(engine)
    return {
        "kernels": kernels.ACTIVE,
        "tuples": len(events),
        **timing,
        "tuples_per_s": len(events) / timing["cpu_s"],
        "sample_size": size,
        "sample_digest": digest,
    }


def run_engine(edges: int, k: int, variant: str) -> dict[str, Any]:
    # numpy (the graph generator) must not leave threads spinning
    return run_variant(
        __file__,
        ["--edges", str(edges), "--k", str(k)],
        variant,
        f"ivmstream, {edges} edges, k={k}",
        ROOT,
        {"OPENBLAS_NUM_THREADS": "1"},
    )


# --- the C++ ----------------------------------------------------------------------------------------------


def write_cpp_input(query: dict[str, Any], events: list[Any], path: Path) -> None:
    """The program's input format: ``relation|timestamp,src,dst`` a line (relation i of the line join is
    the i-th edge of the walk), ended by ``-`` (where it prints its run time)."""
    names = list(query["relations"])
    with path.open("w") as f:
        for ev in events:
            src, dst = ev.row.values()
            f.write(f"{names.index(ev.relation)}|1,{src},{dst}\n")
        f.write("-\n")


def run_cpp(binary: Path, path: Path, k: int, tuples: int) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    proc = subprocess.run([str(binary), "line_join", "3", str(path), str(k)], capture_output=True, text=True)
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    printed = re.search(r"^(\d+) ms$", proc.stdout, re.M)
    size = re.search(r"^size = (\d+)$", proc.stdout, re.M)
    if proc.returncode != 0 or printed is None or size is None:
        raise SystemExit(f"the C++ line_join failed: {proc.stdout[-1000:]} {proc.stderr[-1000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "tuples": tuples,
        "cpu_s": cpu,
        "wall_s": wall,
        "printed_ms": int(printed.group(1)),
        "tuples_per_s": tuples / cpu,
        "sample_size": int(size.group(1)),
    }


# --- the parent -------------------------------------------------------------------------------------------


def measure_case(a: argparse.Namespace, edges: int, k: int, workdir: Path) -> dict[str, Any]:
    variants = [v for v in VARIANTS if v != "cpp" or a.cpp is not None]
    path = workdir / f"line3_{edges}.txt"
    if a.cpp is not None and not path.exists():
        query, events = stream(edges, k)
        write_cpp_input(query, events, path)
    runs = interleaved_runs(
        a.repeats,
        variants,
        f"{edges:,} edges, k = {k:,}",
        lambda v: run_cpp(a.cpp, path, k, 3 * edges) if v == "cpp" else run_engine(edges, k, v),
    )
    digests = {r["sample_digest"] for r in runs if r["variant"] != "cpp"}
    if len(digests) != 1:
        raise SystemExit(f"{edges} edges, k={k}: the compiled and Python steps drew different samples")
    by = {v: [r for r in runs if r["variant"] == v] for v in variants}
    case: dict[str, Any] = {"edges": edges, "k": k, "tuples": 3 * edges, "samples_agree": True, "runs": runs}
    for v in variants:
        case[f"{v}_tuples_per_s_median"] = statistics.median(r["tuples_per_s"] for r in by[v])
    add_ratios(case, by)
    return case


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    cpp = cfg["cpp"]
    lines = [
        f"Run of `{report['command']}`, created {report['created']}; load average "
        f"{report['load_start'][0]:.1f} at the start, {report['load_end'][0]:.1f} at the end (2 cores). "
        f"Line-3 over an Epinions-like graph, each edge once in each relation (tuples = 3 {TIMES} edges). "
        f"Medians of {cfg['repeats']} interleaved repeats, tuples per second of CPU time; the ratios are "
        "the medians of the per-repeat ratios. "
        + ("" if cpp else "The C++ binary was not given: its columns are left out."),
        "",
    ]
    head = "| edges | k | ivmstream compiled | ivmstream Python | compiled / Python | GC share (compiled) |"
    rule = "|---|---|---|---|---|---|"
    if cpp:
        head += " authors' C++ | C++ / compiled | C++ / Python |"
        rule += "---|---|---|"
    lines += [head, rule]
    for c in report["cases"]:
        row = (
            f"| {c['edges']:,} | {c['k']:,} | {c['compiled_tuples_per_s_median']:,.0f} | "
            f"{c['python_tuples_per_s_median']:,.0f} | {c['kernel_speedup_median']:.2f}{TIMES} | "
            f"{100 * c['gc_share_compiled_median']:.0f} % |"
        )
        if cpp:
            row += (
                f" {c['cpp_tuples_per_s_median']:,.0f} | **{c['cpp_over_compiled_median']:.1f}{TIMES}** | "
                f"{c['cpp_over_python_median']:.1f}{TIMES} |"
            )
        lines.append(row)
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    plot_cases(
        report, path, variants=VARIANTS, title="RSJoin line-3: ivmstream against the authors' C++", width=7.5
    )


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    if a.child:
        print_result(engine_child(a.edges[0], a.k[0]))
        return 0
    if a.markdown is not None:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    if a.cpp is not None and not os.access(a.cpp, os.X_OK):
        raise SystemExit(f"--cpp {a.cpp}: not an executable file")
    if a.cpp is None:
        print(f"the authors' C++ is skipped: no binary given (--cpp or {BIN_ENV})", flush=True)
    run_and_store(
        a,
        argv,
        script="bench/native_rsjoin.py",
        out=a.out.with_suffix(".json") if a.out else OUT,
        config={"batch": BATCH, "graph_seed": GRAPH_SEED},
        measure_case=measure_case,
        markdown=markdown,
        plot=plot,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
