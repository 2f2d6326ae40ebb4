"""A tiny run of the runtime benchmark, so `make bench` cannot rot; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import REPO, cli_env


def test_runtime_bench_smoke(tmp_path):
    out = tmp_path / "rt"
    proc = subprocess.run(
        [sys.executable, "bench/runtime.py", "--quick", "--events", "2000", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / "rt.json").read_text())
    assert (tmp_path / "rt.png").stat().st_size > 0
    for case in ("raw", "runtime-noop", "runtime-rocksdb", "runtime-redis"):
        assert data["cases"][case]["records_per_s_median"] > 0
