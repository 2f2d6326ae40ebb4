"""A tiny run of the hostile-flood benchmark, so it cannot rot; no timing is asserted.

The benchmark itself checks that every hostile record was refused with its kind's reason and that the
clean runs refused none; here, that the report and its plot are whole."""

from __future__ import annotations

import pytest
from helpers import run_bench

from fuzz.hostile_records import KINDS

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def test_hostile_bench_smoke(tmp_path):
    data = run_bench("hostile.py", tmp_path / "hostile.json", timeout=600)
    assert (tmp_path / "hostile.png").stat().st_size > 0
    assert sorted(data["services"]) == ["reference", "triangles"] and data["repeats"] == 1
    for name, s in data["services"].items():
        assert s["good_records"] == s["hostile_records"] == 3000, name
        (clean,), (hostile,) = s["runs"]["clean"], s["runs"]["hostile"]
        assert clean["records"] == 3000 and hostile["records"] == 6000 and clean["rejected"] == {}
        assert set(hostile["rejected"]) == set(KINDS) and sum(hostile["rejected"].values()) == 3000
        assert 3000 % clean["batch_size"] == 0 and clean["batch_size"] <= 2000
        assert s["slowdown_paired_median"] > 0
