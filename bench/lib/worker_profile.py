"""Where a worker's time goes: py-spy's collapsed stacks of one worker run, each sample under
``Worker.run`` put in one part of the path, so the runtime's own share (what work on the runtime can
remove at most) is read beside the engine's.

Samples of the partition assignment (``Rebalance.on_assign``: opening the store, restoring) are left
out, as the benchmark's clock starts at the first batch, after it. Parts, first match wins along the
stack: ``engine`` (a frame in a service's code, its checkpoint entries
included), ``state store`` (the store's commit and reads), ``decode`` (the event codec), ``publish``
(results to the output topic and sinks), ``runtime, other`` (the loop, batching, metrics, freeing the
batch's objects).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

PARTS = (
    ("engine", ("/services/",)),
    ("state store", ("/state/",)),
    ("decode", ("/events/codec.py", "/events/msgspec_decoder.py", "/events/model.py", "/events/_fastjson")),
    ("publish", ("/runtime/output.py", "/runtime/produce.py", "/runtime/postgres.py")),
)
OTHER = "runtime, other"


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def part_of(frames: list[str]) -> str:
    for name, marks in PARTS:
        if any(mark in frame for frame in frames for mark in marks):
            return name
    return OTHER


def summarize(collapsed: str, top: int = 8) -> dict[str, Any]:
    """Shares of the samples under ``Worker.run`` per part, and the frames with the most self samples."""
    parts: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        starts = [i for i, f in enumerate(frames) if f.startswith("Worker.run ")]
        if not starts:
            continue
        frames = frames[starts[0] :]
        if any(f.startswith("Rebalance.on_assign ") for f in frames):
            continue
        n = int(count)
        total += n
        parts[part_of(frames)] += n
        own[_short(frames[-1])] += n
    if not total:
        return {"samples": 0}
    return {
        "samples": total,
        "shares": {name: round(parts[name] / total, 3) for name in [*(p for p, _ in PARTS), OTHER]},
        "top_self": [[frame, round(n / total, 3)] for frame, n in own.most_common(top)],
    }


def _short(frame: str) -> str:
    """``func (…/ivmstream/x/y.py:12)`` -> ``func (x/y.py:12)``."""
    head, sep, where = frame.partition(" (")
    if "ivmstream/" in where:
        where = where.split("ivmstream/", 1)[1]
    return f"{head}{sep}{where}" if sep else frame


def profile_run(child: list[str], env: dict[str, str], out: Path, rate: int = 500) -> dict[str, Any] | None:
    """Run ``child`` under py-spy (collapsed stacks written to ``out``); its summary, None without py-spy."""
    spy = py_spy()
    if spy is None:
        return None
    cmd = [spy, "record", "-r", str(rate), "-f", "raw", "-o", str(out), "--", *child]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")
    if proc.returncode != 0 or not out.exists():
        return {"error": (proc.stderr.strip().splitlines() or ["py-spy failed"])[-1]}
    return summarize(out.read_text())
