"""F-IVM's variable-order files (``IMPORT DTREE FROM FILE 'order.txt'``) as fivm's nested mapping.

The format, as F-IVM's examples ship it: a first line ``<variables> <relations>``; then one line per
variable, ``<id> <name> <type> <parent id, -1 for a root> {<ids it depends on>} <flag>``; then one
line per relation, ``<id> <name> <variable ids, comma-separated>``. Only the variables and their
parents shape the order (fivm places each relation under its lowest variable itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ivmstream.sql.errors import SqlError
from ivmstream.sql.source import Statement


def read_dtree(name: str, stmt: Statement, base: Path | None = None) -> dict[str, Any]:
    """The nested mapping ``{var: {child: {...}}}`` of the file (relative to the working directory,
    then to the SQL file)."""
    where = stmt.position(0)
    cwd = base if base is not None else Path.cwd()
    path = next((p for p in (cwd / name, Path(stmt.file).parent / name) if p.is_file()), None)
    if path is None:
        raise SqlError(f"IMPORT DTREE: cannot read {name!r}: no such file", where)
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    try:
        nvars = int(lines[0].split()[0])
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for ln in lines[1 : 1 + nvars]:
            parts = ln.split()
            vid, var, parent = int(parts[0]), parts[1].lower(), int(parts[3])
            names[vid] = var
            parents[vid] = parent
    except (IndexError, ValueError):
        raise SqlError(f"IMPORT DTREE: {name!r} is not an F-IVM variable-order file", where) from None
    nodes: dict[int, dict[str, Any]] = {vid: {} for vid in names}
    roots: dict[str, Any] = {}
    for vid, parent in parents.items():
        target = roots if parent < 0 else nodes.get(parent)
        if target is None:
            raise SqlError(
                f"IMPORT DTREE: {name!r}: variable {names[vid]!r} has unknown parent {parent}", where
            )
        target[names[vid]] = nodes[vid]
    return roots
