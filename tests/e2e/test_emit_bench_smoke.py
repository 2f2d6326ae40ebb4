"""A tiny run of the result-modes benchmark, so it cannot rot; no timing is asserted.

What is asserted follows from the modes: every-event publishes one changelog record per accepted event
(at most one per input event), batch at most one record per key per batch, so never more records."""

from __future__ import annotations

import pytest
from helpers import run_bench

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_emit_bench_smoke(tmp_path):
    data = run_bench("emit.py", tmp_path / "emit", "--services", "reference,triangles", timeout=600)
    assert (tmp_path / "emit.png").stat().st_size > 0
    assert [r["service"] for r in data["services"]] == ["reference", "triangles"]
    for row in data["services"]:
        batch, every = row["best"]["batch"], row["best"]["every-event"]
        assert 0 < every["output_records"] <= row["events"]
        assert 0 < batch["output_records"] <= every["output_records"]
