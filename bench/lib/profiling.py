"""Profiling an engine's hot path: a timed run without a profiler (the per-tuple figure), a cProfile run of
the same batches (where the time goes, function by function, with call counts), and py-spy attached to
the timed run for a flame graph when py-spy is installed.

cProfile inflates small, frequently called functions; the summary therefore states each function's
share of the profiled self time and scales it onto the unprofiled per-tuple time, which is what the docs
print. The call counts per tuple are exact and machine-independent.

A compiled kernel is a built-in to cProfile (one row per call into it, its time in C as self time) and
invisible to py-spy without native unwinding, which needs the process paused: the summary therefore
credits each kernel's built-in row to its C source (``ivmstream/services/<service>/_kernels.c``, the
source of an extension's type or function named after it, or the source that holds the kernel's body)
and states the compiled share of every case, while the flame graph shows kernel time under the Python
line that calls the kernel.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.lib.report import REPO

SITE = "site-packages/"
# a compiled kernel as cProfile names it: "<built-in method ivmstream.services.X._kernels.f>" for a
# function, "<method 'f' of 'ivmstream.services.X._kernels.T' objects>" for a method of a C type (the
# module is ``_kernels``, or ``_<what>_kernels`` for a service's second kernel file)
KERNEL = re.compile(
    r"(?:<built-in method |<method '(?P<method>\w+)' of ')ivmstream\.services\.(?P<service>\w+)"
    r"\.(?P<module>_(?:[a-z]+_)?kernels)\.(?P<name>\w+)"
)


def kernel(func: str) -> tuple[str, str] | None:
    """(C source, function) of a compiled kernel's cProfile row, None for any other function. An
    extension built from several sources keeps a type or function in a file named after it
    (``LevelTree`` in ``_level_tree.c``): that file when it exists, else the module's own source."""
    m = KERNEL.match(func)
    if m is None:
        return None
    name = f"{m['name']}.{m['method']}" if m["method"] else m["name"]
    own = "_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", m["name"]).lower()
    if (REPO / "services" / m["service"] / f"{own}.c").is_file():
        source = own
    elif m["method"] is None:
        source = _defining_source(m["service"], m["module"], m["name"])
    else:
        source = m["module"]
    return f"ivmstream/services/{m['service']}/{source}.c", name


def _defining_source(service: str, module: str, function: str) -> str:
    """The C source (stem) whose body defines ``function`` (``PyObject *k_<function>(``, ``py_`` or bare):
    the module's own source when it does, else the one other source of the service that does (a module
    built from several sources keeps each kernel's body beside its helpers), else the module's own."""
    defines = re.compile(rf"^(?:static )?PyObject \*(?:k_|py_)?{re.escape(function)}\(", re.MULTILINE)
    sources = sorted((REPO / "services" / service).glob("*.c"))
    own = [p for p in sources if p.stem == module]
    if any(defines.search(p.read_text()) for p in own):
        return module
    found = [p.stem for p in sources if p.stem != module and defines.search(p.read_text())]
    return found[0] if len(found) == 1 else module


def hot_path(
    apply: Callable[[Any], Any],
    batches: Sequence[Sequence[Any]],
    read: Callable[[], Any] | None,
    budget: float,
) -> tuple[int, int, float]:
    """Apply ``batches`` (reading the result after each when ``read`` is given) until done or past
    ``budget`` seconds: (batches applied, tuples applied, seconds). Py-spy's flame graph is rooted here."""
    done = tuples = 0
    spent = 0.0
    clock = time.perf_counter
    for batch in batches:
        t0 = clock()
        rejected = apply(batch)
        if read is not None:
            read()
        spent += clock() - t0
        if rejected:
            raise RuntimeError(f"the workload's events were refused: {rejected[:2]}")
        done += 1
        tuples += len(batch)
        if spent > budget:
            break
    return done, tuples, spent


def settle() -> None:
    """Collect what preparing the workload left and freeze it, so collections skip it (as in a worker)."""
    gc.collect()
    gc.freeze()


def where(filename: str) -> str:
    """A code location as the summary shows it: repository-relative, or the package inside site-packages."""
    if filename.startswith("~") or filename.startswith("<"):
        return "builtin"
    if "/ivmstream/" in filename:  # the editable install's link tree under build/
        return "ivmstream/" + filename.rsplit("/ivmstream/", 1)[1]
    path = Path(filename)
    if path.is_relative_to(REPO):
        return str(path.relative_to(REPO))
    if SITE in filename:
        return filename.split(SITE, 1)[1]
    return path.name


def cprofile(
    apply: Callable[[Any], Any], batches: Sequence[Sequence[Any]], read: Callable[[], Any] | None
) -> pstats.Stats:
    """The same hot path under cProfile (no budget: the batches the timed run got through)."""
    profile = cProfile.Profile()
    profile.enable()
    hot_path(apply, batches, read, float("inf"))
    profile.disable()
    return pstats.Stats(profile)


def summarize(stats: pstats.Stats, tuples: int, us_per_tuple: float, top: int = 15) -> dict[str, Any]:
    """The top functions by self time and the self time per source file, each as a share of the profiled
    self time, that share of the unprofiled µs per tuple, and calls per tuple; the compiled kernels'
    rows go to their C sources and their sum is the case's compiled share."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in raw.values()) or 1.0
    rows = []
    files: dict[str, float] = {}
    compiled = 0.0
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in raw.items():
        loc = where(filename)
        native = kernel(func) if loc == "builtin" else None
        if native is not None:
            loc, func = native
            compiled += tt
        files[loc] = files.get(loc, 0.0) + tt
        rows.append(
            {
                "function": func
                if loc == "builtin"
                else f"{func} ({loc})"
                if native
                else f"{func} ({loc}:{line})",
                "compiled": native is not None,
                "self_share": tt / total,
                "cumulative_share": ct / total,
                "self_us_per_tuple": us_per_tuple * tt / total,
                "calls_per_tuple": nc / tuples if tuples else None,
            }
        )
    rows.sort(key=lambda r: -r["self_share"])
    by_file = sorted(files.items(), key=lambda kv: -kv[1])
    return {
        "profiled_self_seconds": total,
        "compiled_share": round(compiled / total, 4),
        "compiled_us_per_tuple": round(us_per_tuple * compiled / total, 3),
        "functions": [_rounded(r) for r in rows[:top]],
        "files": [
            {
                "file": f,
                "self_share": round(t / total, 4),
                "self_us_per_tuple": round(us_per_tuple * t / total, 3),
            }
            for f, t in by_file[:top]
        ],
    }


def _rounded(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (round(v, 4) if k.endswith("share") else float(f"{v:.4g}") if isinstance(v, float) else v)
        for k, v in row.items()
    }
