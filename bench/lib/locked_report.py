"""Read-modify-write of a stored report under a file lock, so benchmark runs started at the same time
by different people each merge their rows into one report without losing the others'."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def report_lock(path: Path) -> Iterator[None]:
    """An exclusive ``fcntl`` lock that stands for ``path``. The lock file lives in the temporary
    directory, named after the report's absolute path: the report itself is replaced on write (a lock
    held on the replaced inode would not exclude the next writer)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"ivmstream-report-{digest}.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_report(
    path: Path,
    update: Callable[[dict[str, Any] | None], dict[str, Any]],
    written: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Under ``path``'s lock: read the stored report (``None`` when there is none), pass it to
    ``update`` and write what it returns (a temporary file renamed over ``path``, so a reader never sees
    half a report), then call ``written`` with it (what is drawn from the report, still under the lock).
    The written report is returned."""
    with report_lock(path):
        stored = json.loads(path.read_text()) if path.exists() else None
        report = update(stored)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(report, indent=1) + "\n")
        os.chmod(tmp, 0o644)  # as a plainly written report (mkstemp makes it private)
        os.replace(tmp, path)
        if written is not None:
            written(report)
        return report
