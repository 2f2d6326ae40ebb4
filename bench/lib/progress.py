"""One progress line format for every benchmark: stderr, so stdout stays the report."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def progress(msg: str) -> None:
    """``[bench.<script> HH:MM:SS] msg`` on stderr, flushed (a long run is watched as it goes)."""
    script = Path(sys.argv[0]).stem or "bench"
    print(f"[bench.{script} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
