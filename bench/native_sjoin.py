"""SJoin on line-3: the reservoir engine's ``strategy: sjoin`` (exact join counts) with its compiled
re-weighing (services/reservoir/_exact_kernels.c), the same engine on its Python steps
(``IVMSTREAM_PURE_PYTHON=1``), and the SJoin authors' C++ (SJoin with the RSJoin paper's modifications,
``driver -a sjoin -q tpcds_ql3``), on the same input stream.

The stream is the RSJoin paper's line-3 one: every edge of an Epinions-like graph
(``bench/reservoir_graphs.py``) once in each of the three relations, all copies shuffled together. Per
case (edges, k), the three variants run back to back in child processes, their order rotating from one
repeat to the next:

- **ivmstream**: the engine built, then the stream applied with ``engine.apply`` in batches of 500,
  in-process; the graph, the events and the engine's construction are not timed. Timed: the thread's CPU
  time (what a loaded shared machine inflates least) and wall time; the garbage collector's share of the
  CPU time is recorded (``gc.callbacks``).
- **C++**: the driver reads the same stream from a file in its own format; timed: the child process's CPU
  time (``RUSAGE_CHILDREN``, reading and parsing included). Its throughput meter (``-m``) gives the
  tuples it read and the join results it counted.

Both are single-threaded (the driver's meter thread sleeps between its half-second readings). The ratio
is C++ tuples/s over ivmstream tuples/s (CPU time) per repeat, then the median. The compiled and Python
runs must draw the same sample (same seed), and every variant must count the same number of join results
as the graph's line-3 size, or the run fails.

The C++ is never part of this repository: build it outside (docs/performance.md, "SJoin: exact counts,
against the authors' C++") and pass the driver with ``--cpp`` or ``SJOIN_BIN``; without it the C++
columns are skipped, saying so.

Usage (from the repo root)::

    .venv/bin/python bench/native_sjoin.py --cpp PATH     # 20K edges, k = 1,000
    .venv/bin/python bench/native_sjoin.py --quick        # smoke sizes (seconds)
    .venv/bin/python bench/native_sjoin.py --markdown     # the docs' table from the stored run

Writes ``bench/results/native_sjoin.json`` and ``.png`` (``--out X.json``).
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

OUT = ROOT / "bench" / "results" / "native_sjoin.json"
BIN_ENV = "SJOIN_BIN"
VARIANTS = ("compiled", "python", "cpp")
BATCH = 500
GRAPH_SEED = 1
TIMES = "\u00d7"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = comparison_parser(__doc__, OUT, cpp_env=BIN_ENV, cpp_help="the SJoin driver")
    p.add_argument("--edges", type=int, nargs="+", default=None, help="graph sizes (20,000)")
    p.add_argument("--k", type=int, nargs="+", default=None, help="sample sizes (1,000)")
    a = comparison_defaults(p.parse_args(argv), BIN_ENV)
    a.edges = a.edges or ([300] if a.quick else [20_000])
    a.k = a.k or ([50] if a.quick else [1_000])
    return a


def workload(edges: int, k: int) -> tuple[dict[str, Any], list[Any], int]:
    """The query, its stream and the graph's line-3 size (counted from degrees, apart from any engine)."""
    from bench.reservoir_graphs import epinions_like, line, line3_size, stream_for

    graph = epinions_like(edges, seed=GRAPH_SEED)
    query = line(3, k, "sjoin")
    return query, stream_for(query, graph), line3_size(graph)


# --- the ivmstream child ----------------------------------------------------------------------------------


def engine_child(edges: int, k: int) -> dict[str, Any]:
    from ivmstream.options import parse_options
    from ivmstream.services.reservoir import exact_kernels
    from ivmstream.services.reservoir.engine import ReservoirEngine
    from ivmstream.services.reservoir.options import OPTIONS

    query, events, _size = workload(edges, k)
    engine = ReservoirEngine(parse_options(OPTIONS, query, owner="bench"))
    batches = [events[i : i + BATCH] for i in range(0, len(events), BATCH)]
    timing = timed_apply(engine, batches)
    size, digest = sample_digest(engine)
    return {
        "kernels": exact_kernels.ACTIVE,
        "tuples": len(events),
        **timing,
        "tuples_per_s": len(events) / timing["cpu_s"],
        "join_size": engine.index.full_size(),
        "places": engine.index.places,
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
    """The driver's input format: ``stream|time,src,dst`` a line (stream i of ``tpcds_ql3`` is the i-th
    edge of the walk; the time column is not read by the join)."""
    names = list(query["relations"])
    with path.open("w") as f:
        for ev in events:
            src, dst = ev.row.values()
            f.write(f"{names.index(ev.relation)}|1,{src},{dst}\n")


def run_cpp(binary: Path, path: Path, k: int, workdir: Path) -> dict[str, Any]:
    meter = workdir / "meter.txt"
    args = [str(binary), "-a", "sjoin", "-q", "tpcds_ql3", "-i", str(path), "-s", "swor", "-r", str(k), "-n"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()
    proc = subprocess.run([*args, "-m", str(meter)], capture_output=True, text=True, cwd=workdir)
    wall = time.perf_counter() - wall0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    printed = re.search(r"^execution duration = ([\d.]+) s$", proc.stdout, re.M)
    if proc.returncode != 0 or printed is None or not meter.exists():
        raise SystemExit(f"the SJoin driver failed: {proc.stdout[-1000:]} {proc.stderr[-1000:]}")
    # the meter: a header, then "seconds  tuples read  results processed" each half second
    readings = [line.split() for line in meter.read_text().splitlines()[1:] if line.strip()]
    tuples = sum(int(r[1]) for r in readings)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "tuples": tuples,
        "cpu_s": cpu,
        "wall_s": wall,
        "printed_s": float(printed.group(1)),
        "tuples_per_s": tuples / cpu,
        "join_size": sum(int(r[2]) for r in readings),
    }


# --- the parent -------------------------------------------------------------------------------------------


def measure_case(a: argparse.Namespace, edges: int, k: int, workdir: Path) -> dict[str, Any]:
    variants = [v for v in VARIANTS if v != "cpp" or a.cpp is not None]
    query, events, line3 = workload(edges, k)
    path = workdir / f"line3_{edges}.txt"
    if a.cpp is not None:
        write_cpp_input(query, events, path)
    runs = interleaved_runs(
        a.repeats,
        variants,
        f"{edges:,} edges, k = {k:,}",
        lambda v: run_cpp(a.cpp, path, k, workdir) if v == "cpp" else run_engine(edges, k, v),
    )
    if len({r["sample_digest"] for r in runs if r["variant"] != "cpp"}) != 1:
        raise SystemExit(f"{edges} edges, k={k}: the compiled and Python steps drew different samples")
    wrong = [r for r in runs if r["join_size"] != line3 or r["tuples"] != len(events)]
    if wrong:
        raise SystemExit(f"{edges} edges, k={k}: a variant counted another join: {wrong[0]}")
    by = {v: [r for r in runs if r["variant"] == v] for v in variants}
    case: dict[str, Any] = {
        "edges": edges,
        "k": k,
        "tuples": len(events),
        "line3_size": line3,
        "samples_agree": True,
        "join_sizes_agree": True,
        "places_per_tuple": by["compiled"][0]["places"] / len(events),
        "runs": runs,
    }
    for v in variants:
        case[f"{v}_tuples_per_s_median"] = statistics.median(r["tuples_per_s"] for r in by[v])
        case[f"{v}_us_per_tuple_median"] = statistics.median(1e6 * r["cpu_s"] / r["tuples"] for r in by[v])
    add_ratios(case, by)
    return case


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    cpp = cfg["cpp"]
    lines = [
        f"Run of `{report['command']}`, created {report['created']}; load average "
        f"{report['load_start'][0]:.1f} at the start, {report['load_end'][0]:.1f} at the end (2 cores). "
        f"`strategy: sjoin` on line-3 over an Epinions-like graph, each edge once in each relation "
        f"(tuples = 3 {TIMES} edges); every variant counted the graph's line-3 size. Medians of "
        f"{cfg['repeats']} interleaved repeats, tuples per second of CPU time (µs per tuple: CPU time over "
        "the whole stream, per tuple); the ratios are the medians of the per-repeat ratios. "
        + ("" if cpp else "The C++ driver was not given: its columns are left out."),
        "",
    ]
    head = (
        "| edges | k | line-3 results | places per tuple | ivmstream compiled | µs per tuple | "
        "ivmstream Python | µs per tuple | compiled / Python | GC share (compiled) |"
    )
    rule = "|---|---|---|---|---|---|---|---|---|---|"
    if cpp:
        head += " authors' C++ | µs per tuple | C++ / compiled | C++ / Python |"
        rule += "---|---|---|---|"
    lines += [head, rule]
    for c in report["cases"]:
        row = (
            f"| {c['edges']:,} | {c['k']:,} | {c['line3_size']:,} | {c['places_per_tuple']:.0f} | "
            f"{c['compiled_tuples_per_s_median']:,.0f} | {c['compiled_us_per_tuple_median']:.1f} | "
            f"{c['python_tuples_per_s_median']:,.0f} | {c['python_us_per_tuple_median']:.1f} | "
            f"{c['kernel_speedup_median']:.2f}{TIMES} | {100 * c['gc_share_compiled_median']:.0f} % |"
        )
        if cpp:
            row += (
                f" {c['cpp_tuples_per_s_median']:,.0f} | {c['cpp_us_per_tuple_median']:.1f} | "
                f"**{c['cpp_over_compiled_median']:.1f}{TIMES}** | {c['cpp_over_python_median']:.1f}{TIMES} |"
            )
        lines.append(row)
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    plot_cases(
        report,
        path,
        variants=VARIANTS,
        title="SJoin line-3 (exact counts): ivmstream against the authors' C++",
        width=6,
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
        print(f"the authors' C++ is skipped: no driver given (--cpp or {BIN_ENV})", flush=True)
    run_and_store(
        a,
        argv,
        script="bench/native_sjoin.py",
        out=a.out.with_suffix(".json") if a.out else OUT,
        config={"batch": BATCH, "graph_seed": GRAPH_SEED},
        measure_case=measure_case,
        markdown=markdown,
        plot=plot,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
