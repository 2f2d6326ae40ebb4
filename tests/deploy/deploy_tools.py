"""Helpers shared by the deployment tests: the real tools, found where `make setup` installs them."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A command-line tool from this virtualenv, its isolated tool venv, or the system (promtool)."""
    for candidate in (VENV_BIN / name, REPO / ".venv" / "checkov" / "bin" / name):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    assert found is not None, f"{name} is missing: `make setup` installs it"
    return found


def run_tool(*args: str, cwd: Path = REPO, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def parse_cli(args: Sequence[str]) -> argparse.Namespace:
    """``ivmstream ARGS`` as the CLI's own parser reads them; a flag it does not know fails the test."""
    from shared.cli import build_parser

    try:
        return build_parser().parse_args(list(args))
    except SystemExit as exc:
        raise AssertionError(f"ivmstream {' '.join(args)}: the CLI refuses these arguments") from exc


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value
