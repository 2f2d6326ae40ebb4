"""The docs' tables of ``bench/profiles.py``, printed from a stored summary: per case, the engine's µs per
tuple, how much of it runs in the compiled kernels, and where it goes (the source files and functions
with the most self time, a kernel's under its C source)."""

from __future__ import annotations

from typing import Any

TOP_FILES = 4
TOP_FUNCTIONS = 6


def _load(case: dict[str, Any]) -> str:
    return f"{case['load_before'][0]:.1f}"


def _in_c(case: dict[str, Any]) -> str:
    return f"{100 * case['compiled_share']:.0f} % ({case['compiled_us_per_tuple']:.1f} µs)"


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        f"Run of `{report['command']}`, created {report['created']}, on {m['cpu_count']} CPUs "
        f"({m['cpu_model']}), CPython {m['python']}; load average {report['load_start'][0]:.1f} at the "
        f"start, {report['load_end'][0]:.1f} at the end. µs per tuple: unprofiled, timed apply (and the "
        "result read after each batch where the worker reads one) over the tuples shown, in wall time and "
        "in the process's CPU time (which the machine's other load does not inflate). Shares: of the "
        "self time under cProfile, scaled onto the unprofiled CPU µs per tuple; calls per tuple are exact. "
        "Kernels: the service's compiled kernels (`compiled`) or its Python loops; in C: the self time "
        "of the compiled kernels' calls (credited to their C sources below).",
        "",
        "| case | engine | workload | tuples | µs per tuple (wall) | µs per tuple (CPU) | tuples/s (wall) "
        "| kernels | in C (CPU) | load | flame graph |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        graph = f"`{c['flamegraph']}`" if c.get("flamegraph") else "\u2013"
        lines.append(
            f"| `{c['case']}` | {c['engine']} | {c['workload']} | {c['tuples']:,} | {c['us_per_tuple']:.1f} "
            f"| {c['cpu_us_per_tuple']:.1f} | {c['tuples_per_second']:,.0f} | {c['kernels']} | {_in_c(c)} "
            f"| {_load(c)} | {graph} |"
        )
    for c in report["cases"]:
        lines += ["", f"**`{c['case']}`** ({c['cpu_us_per_tuple']:.1f} µs of CPU per tuple)", ""]
        lines += ["| where (self time) | share | CPU µs per tuple | calls per tuple |", "|---|---|---|---|"]
        for f in c["files"][:TOP_FILES]:
            lines.append(
                f"| file `{f['file']}` | {100 * f['self_share']:.0f} % | {f['self_us_per_tuple']:.2f} | |"
            )
        for f in c["functions"][:TOP_FUNCTIONS]:
            calls = f["calls_per_tuple"]
            lines.append(
                f"| `{f['function']}` | {100 * f['self_share']:.0f} % | {f['self_us_per_tuple']:.2f} "
                f"| {calls:.3g} |"
            )
    return "\n".join(lines)
