"""Writing a report: the command it records and paths shown relative to the repository."""

from __future__ import annotations

import sys
from pathlib import Path

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
