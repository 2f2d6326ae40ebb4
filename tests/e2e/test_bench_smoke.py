"""A tiny run of the runtime benchmark, so `make bench` cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_runtime_bench_smoke(tmp_path):
    data = run_bench("runtime.py", tmp_path / "rt", "--events", "2000", timeout=300)
    assert (tmp_path / "rt.png").stat().st_size > 0
    for case in ("raw", "runtime-noop", "runtime-rocksdb", "runtime-redis", "runtime-noop-python"):
        assert data["cases"][case]["records_per_s_median"] > 0
    assert data["ratios"]["compiled_decoder_speedup"] > 0
