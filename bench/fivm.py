"""F-IVM against its baselines, every strategy of an experiment on the same stream in one run.

The experiments of docs/fivm/baselines.md at Python scale (workloads: ``bench/fivm_data.py``).
Unless stated, ``FivmEngine`` is fed the round-robin stream (relations in increasing size, one batch of
1,000 tuples each per round) and the throughput is tuples over the total time of the ``apply`` calls.
Each strategy has a time budget (``--budget``): when it runs out the run stops, the throughput over the
processed prefix is reported and the run is marked as timed out.

* **E1** SUM(postcode²) over the Housing join, s = 1..5: fivm, dbt, 1-ivm, f-re, dbt-re.
* **E3** matrix chain ``A = A1·A2·A3`` with updates to A2, dense numpy (single-threaded BLAS): F-IVM's
  factorized update ``A += (A1·U)(Vᵀ·A3)`` against first-order IVM ``A += A1·δA2·A3`` and
  re-evaluation ``A1·A2·A3``, for one-row updates at n = 256, 512, 1,024 and rank-r updates at
  n = 1,024; per-update times. Also the hash-map variant through the engine (``ring: matrix``) at small n.
* **E4** covariance (cofactor ring) on Housing s = 1..3 over m = 6, 10 and 27 features: fivm, sql-opt,
  dbt-ring, the scalar-payload dbt (one query per aggregate), and the scalar-payload 1-ivm at m = 6 and
  10 (its 406 queries at m = 27 would only time out).
* **E6** the triangle R(A,B) ⋈ S(B,C) ⋈ T(C,A) with the degree-3 cofactor over 3 x N edges of a
  power-law (Chung-Lu) graph in the paper's order A → B → C: fivm, fivm with indicator projections,
  dbt-ring, 1-ivm-ring, 1-ivm; then the paper's ONE set-up (only R updatable, S and T loaded first,
  F-IVM-ONE precomputing V@C = S ⋈ T) for fivm-one, 1-ivm and 1-ivm-ring on R's updates.
* **E8** the full Housing join listed, s = 1..4 (the goal's scale) and 6, 8 (where the gap goes):
  fact-payloads, list-payloads, list-keys.
* **e1_growth** E1's query at the paper's 25,000 postcodes up to s = 20: fivm, dbt, 1-ivm.
* **retailer** Retailer (``bench/fivm_retailer.py``: the real dimension tables, generated Weather and
  Inventory): E2 SUM(inventoryunits) with every E1 strategy; E5 the degree-43 cofactor matrix (fivm,
  sql-opt, dbt-ring) and its ONE set-up (only Inventory updatable); the regression model from the root.
* **e7** batch sizes 100 to 100,000 on Housing, Retailer and the triangle (cofactor ring).
* **model** the regression model from the Housing cofactor root, closed form and gradient descent.
* **service**: the fivm service through the real ``Worker`` on the embedded broker at the runtime's
  default batch size, against the engine alone on the same events in the same batches.

Every strategy of an experiment must give the same result: counts exactly, floats within a relative
1e-9 (a timed-out run is compared with the reference strategy replaying the same prefix), and the
reference is checked against a closed form or a brute-force count. A disagreement aborts the run.
Stored entries and bytes (the state entries as the engine encodes them) are a deterministic memory
measure.

Writes ``bench/results/fivm.json`` and ``fivm.png``. Run: ``.venv/bin/python bench/fivm.py``
(``--quick`` for a smoke run writing ``fivm_quick.*``). ``--markdown FILE.json`` prints the section of
docs/fivm/benchmark.md from a report. ``--update FILE.json`` runs the chosen ``--experiments`` and
replaces their sections in a stored report; every section records the command, machine and load of
the run that made it.
"""

from __future__ import annotations

import os

# Single-threaded BLAS: the dense matrix runs compare algorithms, not core counts, on a shared machine.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.fivm_experiments import (  # noqa: E402
    e1_shuffled,
    e1_sum,
    e3_dense,
    e3_hashmap,
    e4_cofactor,
    e6_triangle,
    e8_listing,
)
from bench.fivm_markdown import markdown  # noqa: E402
from bench.fivm_paper import e1_growth, e7_batches, model_experiment, retailer_experiments  # noqa: E402
from bench.fivm_retailer import DIMS_ENV  # noqa: E402
from bench.fivm_runs import BATCH, FEATURES_27, REL_TOL, REPEATS, RESULTS  # noqa: E402
from bench.fivm_summary import summarize  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from ivmstream.runtime.gc_policy import worker_gc  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _dims(args: argparse.Namespace) -> Path | None:
    """The Retailer dimension tables' directory, if one is named."""
    return Path(args.retailer_dims) if args.retailer_dims else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=30.0, help="seconds of apply() per strategy and case")
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs for short runs")
    p.add_argument("--postcodes", type=int, default=10_000, help="E1 Housing postcodes")
    p.add_argument("--e1-scales", default="1,2,3,4,5")
    p.add_argument("--e3-sizes", default="256,512,1024")
    p.add_argument("--e3-ranks", default="1,2,4,8,16,32,64")
    p.add_argument("--e3-updates", type=int, default=10, help="updates per dense matrix case")
    p.add_argument("--e3-hashmap-sizes", default="16,32")
    p.add_argument("--e4-scales", default="1,2,3")
    p.add_argument("--e4-widths", default="6,10,27")
    p.add_argument("--e4-postcodes", type=int, default=3_000)
    p.add_argument("--e6-sizes", default="10000,20000,30000")
    p.add_argument("--e8-scales", default="1,2,3,4,6,8")
    p.add_argument("--e8-postcodes", type=int, default=3_000)
    p.add_argument("--service-postcodes", type=int, default=5_000, help="0: skip the worker run")
    p.add_argument("--growth-scales", default="1,5,10,20", help="e1_growth scales")
    p.add_argument("--growth-postcodes", type=int, default=25_000, help="e1_growth postcodes (the paper's)")
    p.add_argument("--retailer-dates", type=int, default=1, help="Retailer: Weather dates per location")
    p.add_argument(
        "--retailer-dims",
        default=os.environ.get(DIMS_ENV, ""),
        help=f"the F-IVM authors' Retailer dimension tables (default: ${DIMS_ENV}); without them the "
        "Retailer experiments and E7's Retailer rows are left out, saying so",
    )
    p.add_argument("--retailer-inventory", type=int, help="Retailer: only this prefix of Inventory")
    p.add_argument(
        "--retailer-dim-rows",
        type=int,
        help="Retailer: only the first rows of Location and Item and the Census rows they reference",
    )
    p.add_argument("--e7-sizes", default="100,1000,10000,100000")
    p.add_argument("--e7-postcodes", type=int, default=10_000, help="E7 Housing postcodes (s = 1)")
    p.add_argument("--e7-inventory", type=int, default=20_000, help="E7 Retailer Inventory rows")
    p.add_argument("--e7-edges", type=int, default=10_000, help="E7 triangle edges per relation")
    p.add_argument("--model-postcodes", type=int, default=3_000)
    p.add_argument("--experiments", default="e1,e3,e4,e6,e8,e1_growth,retailer,e7,model,service")
    p.add_argument("--update", metavar="FILE.json", help="replace these experiments' sections in a report")
    p.add_argument("--out", default=str(RESULTS / "fivm.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs section of a stored report")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, a short budget")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run every case in this process (default: each experiment, and each E8 scale, in a fresh one)",
    )
    p.add_argument("--part", metavar="FILE.json", help=argparse.SUPPRESS)  # a child's cases, unmerged
    p.add_argument("--part-e8-scale", type=int, help=argparse.SUPPRESS)  # a child's one E8 scale
    args = p.parse_args(argv)
    if args.markdown:
        print(markdown(orjson.loads(Path(args.markdown).read_bytes())), end="")
        return 0
    if args.quick:
        # Tiny sizes, a short budget, and one repeat of a short run only (the repeat round still runs
        # and is checked against the first run; the slow baselines, up to the budget, run once).
        args.budget, args.postcodes, args.e1_scales, args.repeats = 1.0, 200, "1,3", 2
        REPEATS["below_seconds"] = 0.2
        args.e3_sizes, args.e3_ranks, args.e3_updates, args.e3_hashmap_sizes = "32,64", "1,2,4", 3, "6"
        args.e4_scales, args.e4_widths, args.e4_postcodes = "1,2", "6,27", 50
        args.e6_sizes, args.e8_scales, args.e8_postcodes, args.service_postcodes = "200,400", "1,2", 100, 100
        args.growth_scales, args.growth_postcodes, args.model_postcodes = "1,4", 100, 100
        args.e7_sizes, args.e7_postcodes, args.e7_inventory, args.e7_edges = "100,1000", 100, 100, 200
        args.retailer_inventory, args.retailer_dim_rows = 300, 150
        if args.out == str(RESULTS / "fivm.json"):
            args.out = str(RESULTS / "fivm_quick.json")
        gc.freeze()  # the imports: every run's collection skips them (see run_stream)
    if args.part_e8_scale is not None:
        args.e8_scales = str(args.part_e8_scale)
    wanted = set(args.experiments.split(","))
    dims = _dims(args)
    if (dims is None or not dims.is_dir()) and wanted & {"retailer", "e7"}:
        progress(f"no Retailer dimension tables (--retailer-dims or ${DIMS_ENV}): retailer and e7 left out")
        wanted -= {"retailer", "e7"}
    REPEATS["runs"] = args.repeats
    started = time.time()
    report: dict[str, Any] = {
        "benchmark": "fivm",
        "run_id": uuid.uuid4().hex[:8],
        "started": started,
        "command": command_line("bench/fivm.py", argv),
        "quick": args.quick,
        "options": {
            "budget": args.budget,
            "repeats": REPEATS,
            "batch": BATCH,
            "postcodes": args.postcodes,
            "e4_postcodes": args.e4_postcodes,
            "e8_postcodes": args.e8_postcodes,
            "service_postcodes": args.service_postcodes,
            "retailer_dim_rows": args.retailer_dim_rows,
            "rel_tol": REL_TOL,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
    }
    load_at_start = load_average()
    if not args.in_process and not args.part:
        report.update(run_isolated(sys.argv[1:] if argv is None else argv, wanted, args))
    else:
        report.update(run_cases(wanted, args))
    if args.part:
        Path(args.part).write_bytes(orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS))
        return 0
    report = orjson.loads(orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS))
    ran = {
        "run_id": report["run_id"],
        "command": report["command"],
        "minutes": (time.time() - started) / 60,
        "load_at_start": load_at_start,
        "machine": machine_info(),
        "options": report["options"],
    }
    report["sections"] = {
        key: ran
        for name in EXPERIMENTS
        if name in wanted
        for key in RESULT_KEYS.get(name, (name,))
        if key in report
    }
    if args.update:
        stored = orjson.loads(Path(args.update).read_bytes())
        stored.setdefault("sections", {})
        for key, prov in report["sections"].items():
            stored[key] = report[key]
            stored["sections"][key] = prov
        report = stored
        args.out = args.update
    report["summary"] = orjson.loads(orjson.dumps(summarize(report), option=orjson.OPT_NON_STR_KEYS))
    if not args.update:
        report["seconds"] = time.time() - started
        report["machine"] = machine_info()
    out = Path(args.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    from bench.fivm_plots import plot  # matplotlib: only the process that draws imports it

    plot(report, out.with_suffix(".png"))
    print(orjson.dumps(report["summary"], option=orjson.OPT_INDENT_2).decode())
    return 0


EXPERIMENTS = ("e1", "e3", "e4", "e6", "e8", "e1_growth", "retailer", "e7", "model", "service")
RESULT_KEYS = {"e1": ("e1", "e1_shuffled"), "e3": ("e3",), "e4": ("e4",), "e6": ("e6",), "e8": ("e8",)}


def run_isolated(argv: Sequence[str], wanted: set[str], args: argparse.Namespace) -> dict[str, Any]:
    """Each experiment, and each E8 scale, in a fresh interpreter, one after the other: a case's timing
    must not depend on what earlier cases left in the process (a fragmented heap slowed the factorized
    E8 runs by a fifth), as a worker process holds only its own engines. Children get this command
    line with one experiment (and scale) and write their cases to a file merged here."""
    children: list[tuple[str, list[str]]] = []
    for name in EXPERIMENTS:
        if name not in wanted or (name == "service" and not args.service_postcodes):
            continue
        if name == "e8":
            children += [
                ("e8", ["--experiments", "e8", "--part-e8-scale", str(s)]) for s in _ints(args.e8_scales)
            ]
        else:
            children.append((name, ["--experiments", name]))
    if args.quick:
        # A smoke run: E8's scales as always, every other experiment in one child (a child's start-up,
        # not its tiny cases, is most of the run); the children and the merge still run.
        rest = ",".join(name for name, _ in children if name != "e8")
        children = [c for c in children if c[0] == "e8"] + ([(rest, ["--experiments", rest])] if rest else [])
    merged: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fivm-bench-") as tmp:
        for n, (name, extra) in enumerate(children):
            part = Path(tmp) / f"{n}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), *argv, *extra, "--part", str(part)]
            proc = subprocess.run(cmd, cwd=REPO, check=False)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"the {name} case ({' '.join(extra)}) failed with exit code {proc.returncode}"
                )
            got = orjson.loads(part.read_bytes())
            for key in (k for one in name.split(",") for k in RESULT_KEYS.get(one, (one,))):
                if key not in got:
                    continue
                if isinstance(got[key], list):
                    merged.setdefault(key, []).extend(got[key])
                else:
                    merged[key] = got[key]
    return merged


def run_cases(wanted: set[str], args: argparse.Namespace) -> dict[str, Any]:
    """The wanted experiments, in this process."""
    dims = _dims(args)
    report: dict[str, Any] = {}
    with worker_gc():  # the GC policy a worker process runs under, for the engine runs too
        if "e1" in wanted:
            report["e1"] = e1_sum(_ints(args.e1_scales), args.postcodes, args.budget)
            report["e1_shuffled"] = e1_shuffled(_ints(args.e1_scales), args.postcodes, args.budget)
        if "e3" in wanted:
            report["e3"] = e3_dense(
                _ints(args.e3_sizes), _ints(args.e3_sizes)[-1], _ints(args.e3_ranks), args.e3_updates, 3
            )
            report["e3"]["hashmap"] = e3_hashmap(
                _ints(args.e3_hashmap_sizes), args.e3_updates, args.budget, 3
            )
        if "e4" in wanted:
            report["e4"] = e4_cofactor(
                _ints(args.e4_scales), args.e4_postcodes, args.budget, _ints(args.e4_widths)
            )
        if "e6" in wanted:
            report["e6"] = e6_triangle(_ints(args.e6_sizes), args.budget)
        if "e8" in wanted:
            report["e8"] = e8_listing(_ints(args.e8_scales), args.e8_postcodes, args.budget)
        if "e1_growth" in wanted:
            report["e1_growth"] = e1_growth(_ints(args.growth_scales), args.growth_postcodes, args.budget)
        if "retailer" in wanted:
            report["retailer"] = retailer_experiments(
                args.retailer_dates,
                dims,
                args.budget,
                "inventoryunits",
                args.retailer_inventory,
                args.retailer_dim_rows,
            )
        if "e7" in wanted:
            report["e7"] = e7_batches(
                _ints(args.e7_sizes),
                args.e7_postcodes,
                args.e7_inventory,
                dims,
                args.e7_edges,
                args.budget,
                args.retailer_dim_rows,
            )
        if "model" in wanted:
            report["model"] = model_experiment(
                args.model_postcodes,
                args.retailer_dates,
                dims,
                args.retailer_inventory if args.quick else None,  # a full run fits the whole Retailer
                args.retailer_dim_rows,
            )
        if "service" in wanted and args.service_postcodes:
            from bench.fivm_service import service_point  # the runtime: only the service case imports it

            progress("  service: the worker on the embedded broker")
            report["service"] = service_point(1, args.service_postcodes, FEATURES_27)
    return report


if __name__ == "__main__":
    sys.exit(main())
