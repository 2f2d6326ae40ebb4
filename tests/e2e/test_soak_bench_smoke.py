"""A tiny run of the soak benchmark, so it cannot rot; no memory or timing figure is asserted.

What is asserted follows from the configuration: every key that got state is counted by the worker
(resident or in the store), the bounded run ends with at most resident_keys engines per partition
after its last checkpoint, and the unbounded run keeps every engine.
"""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_soak_bench_smoke(tmp_path):
    data = run_bench("soak.py", tmp_path / "soak", timeout=600)
    assert (tmp_path / "soak.png").stat().st_size > 0
    bounded, unbounded = data["summary"]
    partitions = data["options"]["partitions"]
    assert bounded["resident_keys"] is not None and unbounded["resident_keys"] is None
    for s in (bounded, unbounded):
        assert s["state_keys_end"] == data["keys"]
    assert 0 < bounded["resident_engines_end"] <= bounded["resident_keys"] * partitions
    assert unbounded["resident_engines_end"] == data["keys"]
    for run in data["runs"]:
        events = [s["events"] for s in run["samples"]]
        assert events == sorted(events) and events[-1] == data["events"]
