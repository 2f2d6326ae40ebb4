"""A tiny run of the store-backed state benchmark, so it cannot rot; no timing is asserted."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_backed_state_bench_smoke(tmp_path):
    data = run_bench("backed_state.py", tmp_path / "bs", "--sizes", "1000,3000", timeout=300)
    assert (tmp_path / "bs.png").stat().st_size > 0
    cases = data["cases"]
    assert {(c["tuples"], c["cache"]) for c in cases} == {
        (n, cache) for n in (1000, 3000) for cache in (100, 1000, None)
    }
    for c in cases:
        assert c["updates_per_second"] > 0 and c["checkpoints"] > 0
        if c["cache"] is not None:  # after the final checkpoint at most the cache is resident
            assert c["resident_tuples"] <= c["cache"]
        else:
            assert c["hit_rate"] == 1.0 and c["resident_tuples"] >= c["tuples"]
