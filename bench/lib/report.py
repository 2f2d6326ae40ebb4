"""Writing a report: the command it records, when it started, paths shown relative to the repository,
and the report stored with its plot and printed as its table."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"


def command_line(script: str, argv: list[str] | None) -> str:
    """The command a report records: the script and its options, without ``--out`` (where the report
    was written is a path of the machine that ran it, not part of what was measured)."""
    args = list(argv if argv is not None else sys.argv[1:])
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return " ".join([script, *kept])


def shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (reports name their plots this way)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run_header(script: str, argv: list[str] | None, started: float) -> dict[str, str]:
    """A report's first fields: the command (``command_line``) and when the run started, in UTC."""
    return {
        "command": command_line(script, argv),
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
    }


def store_report(
    report: dict[str, Any],
    out: Path,
    plot: Callable[[dict[str, Any], Path], None],
    markdown: Callable[[dict[str, Any]], str],
) -> None:
    """The report as JSON at ``out`` and its plot beside it (``.png``); then its table and where it went,
    printed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    print(f"wrote {shown(out)}")
