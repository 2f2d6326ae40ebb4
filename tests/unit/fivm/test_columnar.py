"""Column execution of relation deltas (docs/fivm/algorithm.md §2.14) against the per-tuple trigger.

Both executions run the same compiled plans over the same views, so after every batch they must hold
the same keys in every view with equal counts, and payloads equal up to float summation order; the
DuckDB oracle tests draw both executions too. Deltas the int64 columns cannot hold exactly fall back to
the per-tuple trigger before any view changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm import columnar
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.maintain import FivmMaintainer
from tests.unit.fivm.fivm_oracle import acyclic_schema, event_batches

TRIANGLE = {
    "R": [{"A": "float"}, {"B": "float"}],
    "S": [{"B": "float"}, {"C": "float"}],
    "T": [{"C": "float"}, {"A": "float"}],
}


def in_columns(engine: FivmEngine) -> bool:
    maint = engine.maint
    assert isinstance(maint, FivmMaintainer)
    return maint.columnar


def assert_same_views(a: FivmEngine, b: FivmEngine) -> None:
    assert a.maint.views.keys() == b.maint.views.keys()
    for name, view in a.maint.views.items():
        other = b.maint.views[name]
        assert list(view.data) == list(other.data), name  # same keys, created in the same order
        for key, p in view.data.items():
            q = other.data[key]
            assert (p.lo, p.count, p.k) == (q.lo, q.count, q.k), (name, key)
            assert p.sums == pytest.approx(q.sums, rel=1e-12, abs=1e-9)
            assert p.quad == pytest.approx(q.quad, rel=1e-12, abs=1e-9)


def run_both(config: dict[str, Any], batches: list[list[UpdateEvent]]) -> None:
    columns = FivmEngine(config)
    per_tuple = FivmEngine({**config, "execution": "per-tuple"})
    assert in_columns(columns) and not in_columns(per_tuple)
    for batch in batches:
        assert columns.apply(batch) == per_tuple.apply(batch) == []
        assert_same_views(columns, per_tuple)
        got, want = columns.result()["value"], per_tuple.result()["value"]
        assert got["count"] == want["count"]
        assert got["sum"] == pytest.approx(want["sum"], rel=1e-12, abs=1e-9)
        for row, wanted in zip(got["sumprod"], want["sumprod"], strict=True):
            assert row == pytest.approx(wanted, rel=1e-12, abs=1e-9)


@settings(max_examples=80)
@given(data=st.data())
def test_columns_equal_the_per_tuple_trigger_on_random_acyclic_joins(data: st.DataObject) -> None:
    config = data.draw(acyclic_schema(components=data.draw(st.integers(1, 2))))
    types = {next(iter(c)): next(iter(c.values())) for spec in config["relations"].values() for c in spec}
    numeric = sorted(v for v, t in types.items() if t != "str")
    assume(numeric)
    features = data.draw(st.lists(st.sampled_from(numeric), min_size=1, max_size=4, unique=True))
    config.update(ring="covariance", features=features)
    run_both(config, data.draw(event_batches(config, max_batches=5)))


@settings(max_examples=40)
@given(data=st.data(), indicators=st.booleans())
def test_columns_equal_the_per_tuple_trigger_on_the_triangle(data: st.DataObject, indicators: bool) -> None:
    """The triangle's plans probe siblings through indexes (rows fan out per delta row)."""
    config: dict[str, Any] = {"relations": TRIANGLE, "ring": "covariance", "indicators": indicators}
    run_both(config, data.draw(event_batches(config, domain=data.draw(st.integers(1, 4)))))


def test_counts_too_large_for_int64_columns_run_per_tuple_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A product of counts beyond 2^52 is refused by the columns before any view changed; the per-tuple
    trigger then keeps the exact Python-int count."""
    calls = {"columns": 0, "refused": 0}
    real = columnar.propagate

    def counting(*args: Any) -> Any:
        calls["columns"] += 1
        try:
            return real(*args)
        except columnar.Unrepresentable:
            calls["refused"] += 1
            raise

    monkeypatch.setattr(columnar, "propagate", counting)
    config = {"relations": {"R": ["a", "x"], "S": ["a", "y"]}, "ring": "covariance", "features": ["x", "y"]}
    engine = FivmEngine(config)
    big, bigger = 3**30, 5**25  # each fits int64; their product does not
    assert engine.apply([UpdateEvent("R", {"a": 1.0, "x": 2.0}, big)]) == []
    assert engine.apply([UpdateEvent("S", {"a": 1.0, "y": 3.0}, bigger)]) == []
    assert calls == {"columns": 2, "refused": 1}
    got = engine.result()["value"]
    assert got["count"] == big * bigger
    assert got["sum"] == pytest.approx([2.0 * big * bigger, 3.0 * big * bigger], rel=1e-12)


def test_exact_decimals_and_other_rings_keep_the_per_tuple_trigger() -> None:
    relations = {"R": ["a", "x"], "S": ["a", "y"]}
    assert in_columns(FivmEngine({"relations": relations, "ring": "covariance"}))
    assert not in_columns(FivmEngine({"relations": relations, "ring": "covariance", "decimals": 2}))
    assert not in_columns(FivmEngine({"relations": relations, "ring": "sum", "sum": ["x"]}))
    sql_opt = FivmEngine({"relations": relations, "ring": "covariance", "strategy": "sql-opt"})
    assert not in_columns(sql_opt)
