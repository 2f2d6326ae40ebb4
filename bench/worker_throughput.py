"""Worker throughput: each service's benchmark workload through the real ``Worker``, this checkout against
a baseline commit, in the same session on the same records.

Per service (``bench/worker_workloads.py``), the records are built once and every measurement runs in a
fresh child process (``bench/worker_throughput_child.py``): a ``Worker`` over the in-process
``InMemoryCluster`` (no broker: what is timed is the worker's own path, decode, batch, apply, publish
and RocksDB checkpoints, at the service's batch size), from its first batch to its final checkpoint.
The baseline child imports the baseline commit's ``ivmstream`` (``bench/lib/baseline_tree.py``: a
``git archive`` of the commit outside the repository, its C extensions compiled in place), the other
one this checkout's. The two alternate, their order swapped every repeat, so load drift hits both.

Reported per service: events per second of wall time and of process CPU time (the CPU figure is the one
to compare on a loaded machine), medians over the repeats, and the median of the per-repeat
this-checkout/baseline ratios; the load average beside each measurement.

Usage (from the repo root)::

    .venv/bin/python bench/worker_throughput.py                       # 3 repeats, baseline a896f2d^
    .venv/bin/python bench/worker_throughput.py --quick               # smoke: tiny workloads, 1 repeat
    .venv/bin/python bench/worker_throughput.py --profile             # + where each side's time goes
    .venv/bin/python bench/worker_throughput.py --markdown            # the docs table of the stored run
    .venv/bin/python bench/worker_throughput.py --services vwap --merge  # re-measure one service, merged

``--merge`` keeps the stored report's other services and replaces the measured ones, under a file lock
(several services may be re-measured at the same time); each service records the run that measured it
(command, commit, repeats, load, time) and the tables name them when the rows come from different runs.

Writes ``bench/results/worker_throughput.json`` and ``.png`` (``worker_throughput_quick.*`` with
``--quick``); with ``--merge`` the PNG is redrawn from the merged report.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.progress import progress  # noqa: E402
from bench.lib.report import RESULTS, command_line, shown  # noqa: E402
from bench.worker_workloads import BUILDERS  # noqa: E402

BASELINE = "a896f2d^"  # the runtime and engines before their compiled kernels
CHILD = REPO / "bench" / "worker_throughput_child.py"
SIDES = ("baseline", "head")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--services", default=",".join(BUILDERS), help="comma-separated subset")
    p.add_argument("--repeats", type=int, default=None, help="measurements per side (default 3; 1 quick)")
    p.add_argument("--quick", action="store_true", help="smoke size: tiny workloads, 1 repeat")
    p.add_argument("--baseline", default=BASELINE, help=f"the commit compared against (default {BASELINE})")
    p.add_argument(
        "--baseline-dir",
        type=Path,
        default=None,
        help="where the baseline is built and kept (outside the repository; default a temporary one)",
    )
    p.add_argument(
        "--head",
        default=None,
        help="a commit to measure, built like the baseline (default: this checkout's working tree)",
    )
    p.add_argument(
        "--same-code",
        action="store_true",
        help="run this checkout on both sides (no baseline is built: the smoke test's calibration)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, one more run per service and side under py-spy (not counted): the runtime's share",
    )
    p.add_argument(
        "--merge",
        action="store_true",
        help="merge the measured services into the stored report (--out), keeping the other services' rows",
    )
    p.add_argument("--markdown", nargs="?", const=str(RESULTS / "worker_throughput.json"), default=None)
    p.add_argument("--out", type=Path, default=None, help="the report (a .png beside it)")
    a = p.parse_args(argv)
    a.services = [s.strip() for s in a.services.split(",") if s.strip()]
    unknown = sorted(set(a.services) - set(BUILDERS))
    if unknown:
        p.error(f"unknown service(s) {', '.join(unknown)} (known: {', '.join(BUILDERS)})")
    a.repeats = a.repeats or (1 if a.quick else 3)
    name = "worker_throughput_quick" if a.quick else "worker_throughput"
    a.out = a.out.with_suffix(".json") if a.out else RESULTS / f"{name}.json"
    return a


def child_env(pythonpath: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def run_child(spec_path: Path, pythonpath: str | None) -> dict[str, Any]:
    env = child_env(pythonpath)
    load = load_average()[0]
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(spec_path)], env=env, capture_output=True, text=True, cwd="/"
    )
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        progress(f"a worker run of {spec_path.stem} failed:\n{proc.stderr[-3000:]}")
        return {"error": lines[-1], "load": load}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load": load}


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per side and the per-repeat ratios (this checkout over the baseline)."""
    base, head = runs["baseline"], runs["head"]
    out: dict[str, Any] = {}
    for figure in ("events_per_second", "events_per_cpu_second"):
        for side in SIDES:
            out[f"{side}_{figure}"] = statistics.median(r[figure] for r in runs[side])
        ratios = [h[figure] / b[figure] for b, h in zip(base, head, strict=True)]
        out[f"ratios_{figure}"] = [round(x, 3) for x in ratios]
        out[f"ratio_{figure}"] = round(statistics.median(ratios), 3)
    out["same_published_results"] = len({r["results_sha1"] for r in base + head}) == 1
    out["dead_letters"] = {side: max(r["dead_letters"] for r in runs[side]) for side in SIDES}
    out["load"] = [r["load"] for r in base + head]
    return out


def measure(a: argparse.Namespace, paths: dict[str, str | None], tmp: Path) -> dict[str, Any]:
    specs: dict[str, Path] = {}
    services: dict[str, Any] = {}
    for name in a.services:
        workload = BUILDERS[name](a.quick)
        spec = {
            "service": workload.service,
            "config": workload.config,
            "values": workload.values,
            "keys": workload.record_keys(),
            "passes": workload.passes,
        }
        specs[name] = tmp / f"{name}.pickle"
        specs[name].write_bytes(pickle.dumps(spec))
        services[name] = {
            "workload": workload.description,
            "events": len(workload.values),
            "passes": workload.passes,
        }
        progress(f"{name}: {workload.description} ({len(workload.values):,} records)")
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {s: [] for s in SIDES} for n in a.services}
    for rep in range(a.repeats):
        for name in a.services:
            for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                got = run_child(specs[name], paths[side])
                runs[name][side].append(got)
                if "error" in got:
                    continue
                imported = got.pop("ivmstream")  # a path of this machine: checked, not recorded
                if paths[side] is not None and not imported.startswith(str(paths[side])):
                    raise SystemExit(f"the {side} run imported ivmstream from {imported}, not {paths[side]}")
                progress(
                    f"  {name} {side} (repeat {rep + 1}/{a.repeats}): "
                    f"{got['events_per_second']:,.0f} events/s, "
                    f"{got['events_per_cpu_second']:,.0f} per CPU s, load {got['load']}"
                )
    if a.profile:
        from bench.lib.worker_profile import profile_run

        for name in a.services:
            services[name]["profile"] = {}
            for side in SIDES:
                progress(f"  {name} {side}: profiling one more run")
                services[name]["profile"][side] = profile_run(
                    [sys.executable, str(CHILD), str(specs[name])],
                    child_env(paths[side]),
                    tmp / f"{name}-{side}.collapsed",
                )
    for name in a.services:
        failed = [r["error"] for side in SIDES for r in runs[name][side] if "error" in r]
        if failed:
            services[name].update(error=failed[0], runs=runs[name])
            continue
        first = runs[name]["head"][0]
        services[name].update(
            batch_size=first["batch_size"],
            checkpoint_interval_s=first["checkpoint_interval_s"],
            **summarize(runs[name]),
            runs=runs[name],
        )
    return services


RUN_FIELDS = ("command", "head", "created", "repeats", "load_start", "load_end")


def run_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    """The run that measured service ``name``: its own record, or the report's (a report written
    before services carried their run)."""
    own = report["services"][name].get("run")
    return own if own is not None else {k: report[k] for k in RUN_FIELDS}


def merge_reports(stored: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``stored`` with ``new``'s services replacing its entries of the same names (the others kept,
    each with the run that measured it); the report's own fields describe the latest run."""
    if stored is None:
        return new
    for field in ("baseline", "quick"):
        if stored.get(field) != new.get(field):
            raise SystemExit(
                f"cannot merge: the stored report's {field} is {stored.get(field)!r}, this run's "
                f"{new.get(field)!r}"
            )
    services = {name: {**s, "run": run_of(stored, name)} for name, s in stored["services"].items()}
    for name, measured in new["services"].items():
        if "error" in measured and name in services:
            progress(f"{name} failed ({measured['error']}): its stored row is kept")
            continue
        services[name] = measured
    return {**new, "services": services}


def markdown(report: dict[str, Any]) -> str:
    base = report["baseline"]
    runs = {name: run_of(report, name) for name in report["services"]}
    distinct = {json.dumps([r[k] for k in ("command", "head", "repeats")]) for r in runs.values()}
    if len(distinct) <= 1:
        run = next(iter(runs.values()), {k: report[k] for k in RUN_FIELDS})
        measured = (
            f"against `{run['head']}`, {run['repeats']} interleaved repeat(s), load "
            f"{run['load_start'][0]} at the start and {run['load_end'][0]} at the end (`{run['command']}`)"
        )
    else:
        measured = (
            "against this checkout at the commit, repeats and load of each service's run (second table)"
        )
    lines = [
        f"Through the worker (`InMemoryCluster`, RocksDB checkpoints, the service's batch size), "
        f"baseline `{base['commit']}` {measured}. Same results: every run of both sides published the "
        "same last result per key.",
        "",
        "| service | workload | events | batch | baseline events/CPU s | events/CPU s | ratio (CPU) "
        "| baseline events/s | events/s | ratio (wall) | load | same results |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, s in report["services"].items():
        if "error" in s:
            lines.append(
                f"| {name} | {s['workload']} | {s['events']:,} | | failed: {s['error']} | | | | | | | |"
            )
            continue
        load = f"{min(s['load']):.1f}-{max(s['load']):.1f}"
        events = f"{s['events']:,}" + (f" x {s['passes']} runs" if s.get("passes", 1) > 1 else "")
        lines.append(
            f"| {name} | {s['workload']} | {events} | {s['batch_size']:,} "
            f"| {s['baseline_events_per_cpu_second']:,.0f} | {s['head_events_per_cpu_second']:,.0f} "
            f"| {s['ratio_events_per_cpu_second']:.2f}x "
            f"| {s['baseline_events_per_second']:,.0f} | {s['head_events_per_second']:,.0f} "
            f"| {s['ratio_events_per_second']:.2f}x | {load} "
            f"| {'yes' if s['same_published_results'] else 'no'} |"
        )
    if len(distinct) > 1:
        lines += [
            "",
            "| service | measured at | interleaved repeats | load (start, end) | run at | command |",
            "|---|---|---:|---|---|---|",
        ]
        for name, run in runs.items():
            lines.append(
                f"| {name} | `{run['head']}` | {run['repeats']} | {run['load_start'][0]}, "
                f"{run['load_end'][0]} | {run['created']} | `{run['command']}` |"
            )
    profiled = {n: s["profile"] for n, s in report["services"].items() if s.get("profile")}
    if profiled:
        lines += [
            "",
            "Where the worker's time goes (py-spy, one more run per side, samples under `Worker.run`; "
            "the engine's share includes its checkpoint entries):",
            "",
            "| service | side | engine | state store | decode | publish | runtime, other "
            "| top frame (self) |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, sides in profiled.items():
            for side in SIDES:
                prof = sides.get(side) or {}
                if "shares" not in prof:
                    lines.append(f"| {name} | {side} | {prof.get('error', 'no samples')} | | | | | |")
                    continue
                shares = " | ".join(f"{100 * v:.0f}%" for v in prof["shares"].values())
                frame, share = prof["top_self"][0]
                lines.append(f"| {name} | {side} | {shares} | `{frame}` {100 * share:.0f}% |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    from bench.lib.plots import plt

    names = [n for n, s in report["services"].items() if "error" not in s]
    cpu = [report["services"][n]["ratio_events_per_cpu_second"] for n in names]
    wall = [report["services"][n]["ratio_events_per_second"] for n in names]
    xs = range(len(names))
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar([x - 0.2 for x in xs], cpu, 0.4, label="events per CPU second", color="#4c72b0")
    ax.bar([x + 0.2 for x in xs], wall, 0.4, label="events per second (wall)", color="#dd8452")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(3.0, color="grey", lw=0.8, ls="--")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel(f"this checkout / {report['baseline']['commit']}")
    ax.set_title("Through the worker: events/s against the baseline (median of paired repeats)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def without_baseline_dir(command: str) -> str:
    """The recorded command without ``--baseline-dir``: where the baseline was built is a path of the
    machine that ran it, not part of what was measured."""
    words, kept = command.split(" "), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--baseline-dir":
            skip = True
        elif not word.startswith("--baseline-dir="):
            kept.append(word)
    return " ".join(kept)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    if a.markdown is not None:
        print(markdown(json.loads(Path(a.markdown).read_text())))
        return 0
    started, load_start = time.time(), load_average()
    head = subprocess.run(
        ["git", "rev-parse", "--short", a.head or "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="ivmstream-worker-throughput-") as tmp:
        built = a.baseline_dir or Path(tmp)
        paths: dict[str, str | None] = {"baseline": None, "head": None}
        if not a.same_code:
            from bench.lib.baseline_tree import build_baseline

            progress(f"building the baseline {a.baseline}")
            paths["baseline"] = str(build_baseline(a.baseline, built / "baseline"))
            if a.head is not None:
                progress(f"building {a.head}")
                paths["head"] = str(build_baseline(a.head, built / "head"))
        services = measure(a, paths, Path(tmp))
    run = {
        "command": without_baseline_dir(
            command_line("bench/worker_throughput.py", list(argv) if argv is not None else None)
        ),
        "head": head if a.head is not None else f"{head} (working tree)",
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "repeats": a.repeats,
        "load_start": load_start,
        "load_end": load_average(),
    }
    report = {
        **run,
        "baseline": {"commit": "this checkout" if a.same_code else a.baseline},
        "harness": "InMemoryCluster (in-process), RocksDB state store, worker GC policy",
        "quick": a.quick,
        "machine": machine_info(),
        "services": {name: {**s, "run": run} for name, s in services.items()},
    }
    if a.merge:
        from bench.lib.locked_report import update_report

        report = update_report(
            a.out,
            lambda stored: merge_reports(stored, report),
            lambda merged: plot(merged, a.out.with_suffix(".png")),
        )
    else:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1) + "\n")
        plot(report, a.out.with_suffix(".png"))
    print(markdown(report))
    print(f"wrote {shown(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
