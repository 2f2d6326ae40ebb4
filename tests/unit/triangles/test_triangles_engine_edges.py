"""Relations mode edge cases (docs/triangles/algorithm.md §6.4): an empty database, support versus
multiplicity, absent tuples, entries reaching zero, ε at 0 and 1, the factorized configuration, huge
multiplicities, bad events, the engine protocol, configuration checks."""

from __future__ import annotations

import random

import orjson
import pytest

from ivmstream.engine import Engine, EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.triangles.engine import create_engine
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine
from tests.unit.triangles.engine_checks import (
    CONFIGS,
    ev,
    make,
)

# --- edge cases (§6.4) ---------------------------------------------------------------------------------


def test_empty_database():
    engine = IvmEpsEngine("relations", "1/2")
    assert engine.result()["count"] == 0 and engine.n == 1
    engine.check_invariants()
    snap = engine.snapshot()
    other = IvmEpsEngine("relations", "1/2")
    other.restore(snap)
    assert other.result() == engine.result()
    seen = []
    engine.on_rebalance = seen.append
    engine.apply([ev("R", 1, 2, 1)])  # |D| = 1 = N: N = 2, a major rebalancing on one tuple
    assert engine.n == 2 and [s["kind"] for s in seen] == ["major"]
    engine.apply([ev("S", 2, 3, 1)])  # |D| = 2 = N: N = 4
    engine.apply([ev("S", 2, 3, -1)])  # |D| = 1, N//4 = 1: stays
    assert engine.n == 4
    engine.apply([ev("R", 1, 2, -1)])  # |D| = 0 < 1: N = 4//2 - 1 = 1
    assert engine.n == 1 and engine.size == 0 and engine.result()["count"] == 0
    engine.check_invariants()


def test_support_versus_multiplicity():
    """Duplicate inserts and a delete 2→1 change neither degrees nor |D|; a delete to 0 removes the tuple."""
    engine = IvmEpsEngine("relations", "1/3")
    engine.apply([ev("R", 1, 2, 1), ev("S", 2, 3, 1), ev("T", 3, 1, 1)])
    n, size = engine.n, engine.size
    assert engine.result()["count"] == 1
    engine.apply([ev("R", 1, 2, 1)])  # 1 → 2
    assert engine.size == size and engine.n == n and len(engine.lf[0][1]) == 1
    assert engine.result()["count"] == 2
    engine.apply([ev("R", 1, 2, -1)])  # 2 → 1
    assert engine.size == size and engine.result()["count"] == 1
    engine.apply([ev("R", 1, 2, -1)])  # 1 → 0: gone, with its row
    assert engine.size == size - 1 and 1 not in engine.lf[0] and 1 not in engine.hf[0]
    assert engine.result()["count"] == 0
    engine.check_invariants()


def test_absent_tuple_has_z_semantics():
    """Deleting an absent tuple creates multiplicity -1, raises |D| and the degree; Q may go negative."""
    engine = IvmEpsEngine("relations", "1/2")
    engine.apply([ev("R", 1, 2, 1), ev("S", 2, 3, 1)])
    size = engine.size
    assert engine.apply([ev("T", 3, 1, -1)]) == []
    assert engine.size == size + 1 and engine._mult(2, 3, 1) == -1
    assert engine.result()["count"] == -1
    engine.apply([ev("T", 3, 1, -2)])
    assert engine.result()["count"] == -3
    engine.check_invariants()


def test_view_entries_reaching_zero_are_deleted():
    engine = IvmEpsEngine("relations", {"R": "0", "S": "1", "T": "1/2"})  # R all heavy, S all light
    engine.apply([ev("R", 1, 2, 1), ev("S", 2, 5, 1), ev("S", 3, 5, 1)])
    assert engine.views[0] == {(1, 5): 1}  # V_RS(1,5) = R_h(1,2)·S_l(2,5)
    engine.apply([ev("R", 1, 3, -1)])  # absent tuple at -1: V_RS(1,5) = 1 - 1 = 0 must disappear
    assert engine.views[0] == {}
    engine.apply([ev("R", 1, 3, 1)])
    assert engine.views[0] == {(1, 5): 1}
    engine.apply([ev("S", 2, 5, -1)])
    assert engine.views[0] == {}
    engine.check_invariants()


def test_values_present_in_several_relations_are_partitioned_independently():
    """alpha is heavy in R (R-degree 30) and light in T (T-degree 1): parts are per relation."""
    engine = IvmEpsEngine("relations", "1/2")
    engine.load(
        {
            "R": {("x0", b): 1 for b in range(30)},
            "S": {(b, "x0"): 1 for b in range(30)},
            "T": {("x0", "x0"): 1},
        }
    )
    assert "x0" in engine.hf[0] and "x0" in engine.lf[2] and "x0" not in engine.hf[2]
    assert engine.result()["count"] == 30
    engine.apply([ev("T", "x0", "x0", 1)])
    assert engine.result()["count"] == 60
    engine.apply([ev("S", 3, "x0", -1)])
    assert engine.result()["count"] == 58
    engine.check_invariants()


def test_epsilon_zero_never_populates_light_parts():
    """ε=0: everything routes heavy, θ_down = 1 so demotion never fires, all views stay empty (I9)."""
    engine = IvmEpsEngine("relations", "0")
    rng = random.Random(3)
    for _ in range(300):
        engine.apply([ev(rng.choice("RST"), rng.randrange(6), rng.randrange(6), rng.choice([1, 1, -1]))])
        assert not any(engine.lf) and not any(engine.views)
    assert engine.thr[0] == (1, 2, 1)
    assert engine.minor_up == engine.minor_down == 0
    engine.check_invariants()


def test_epsilon_one_never_promotes():
    """ε=1: θ_up = ⌈1.5N⌉ > |D|, so everything stays light and the views stay empty (I9)."""
    engine = IvmEpsEngine("relations", "1")
    for b in range(50):  # one value of degree 50: still light
        engine.apply([ev("R", 0, b, 1)])
        assert not any(engine.hf) and not any(engine.views)
        assert engine.thr[0].up > engine.size
    assert engine.minor_up == 0
    engine.check_invariants()


def test_factorized_configuration_materializes_exactly_v_st():
    """I10: ε_R ∈ {0,1}, ε_S = 0, ε_T = 1 keeps V_RS = V_TR = ∅ and V_ST = S⋈T; R updates are O(1)."""
    for eps_r in ("0", "1"):
        engine = IvmEpsEngine("relations", {"R": eps_r, "S": "0", "T": "1"})
        rng = random.Random(5)
        for _ in range(200):
            rel = rng.choice("ST")
            engine.apply([ev(rel, rng.randrange(5), rng.randrange(5), rng.choice([1, 1, -1]))])
        engine.check_invariants()  # includes I10
        assert engine.views[1] and not engine.views[0] and not engine.views[2]
        engine.apply([ev("R", 9, 0, 1)])
        assert engine.work_last == 1  # the V_ST probe; T_h and S_l are empty, so nothing else runs


def test_huge_multiplicities_stay_exact_in_result_and_snapshot():
    big = 2**70
    engine = IvmEpsEngine("relations", "1/2")
    engine.apply([ev("R", 1, 2, big), ev("S", 2, 3, big), ev("T", 3, 1, 1)])
    assert engine.result()["count"] == str(big * big)  # beyond int64: an exact decimal string
    orjson.dumps(engine.result())
    other = IvmEpsEngine("relations", "1/2")
    other.restore(engine.snapshot())
    assert other.q == big * big and other.snapshot() == engine.snapshot()
    other.apply([ev("T", 3, 1, -1)])
    assert other.result()["count"] == 0


def test_bad_events_are_refused_and_change_nothing():
    engine = create_engine("relations", "ivm-eps")
    engine.apply([ev("R", 1, 2, 1)])
    snap = engine.snapshot()
    bad = [
        ev("R", 2**63, 1, 1),
        UpdateEvent("R", {"a": 1}, 1),
        UpdateEvent("X", {"a": 1, "b": 2}, 1),
        ev("S", 1.5, 2, 1),
        ev("S", 1, 2, 0),
    ]
    rejected = engine.apply(bad)
    assert [(r.index, r.code) for r in rejected] == [
        (0, "id-out-of-range"),
        (1, "missing-column"),
        (2, "unknown-relation"),
        (3, "wrong-type"),
        (4, "zero-delta"),
    ]
    assert engine.snapshot() == snap


def test_engines_follow_the_protocol_and_report_numeric_stats():
    for strategy, eps in CONFIGS:
        engine = make(strategy, eps)
        assert isinstance(engine, Engine)
        engine.apply([ev("R", 1, 2, 1), ev("S", 2, 3, 1), ev("T", 3, 1, 1)])
        stats = engine.stats()
        assert stats["count"] == 1.0 and all(isinstance(v, float) for v in stats.values())
        orjson.dumps(engine.result())
    ivm = create_engine("relations", "ivm-eps", {"R": "1/3", "S": "1/2", "T": "1"})
    stats = ivm.result()["stats"]
    for key in ("N", "theta_strict_R", "theta_up_S", "theta_down_T", "heavy_values_R", "part_S_h", "view_ST"):
        assert key in stats
    assert ivm.result()["stats"]["view_entries"] == stats["view_RS"] + stats["view_ST"] + stats["view_TR"]


def test_restore_refuses_a_different_configuration():
    snap = IvmEpsEngine("relations", "1/2").snapshot()
    with pytest.raises(EngineError, match="snapshot was taken with"):
        IvmEpsEngine("relations", "1/3").restore(snap)
    with pytest.raises(EngineError, match="snapshot was taken with"):
        create_engine("graph", "ivm-eps").restore(snap)
    with pytest.raises(EngineError, match="not valid JSON"):
        IvmEpsEngine("relations", "1/2").restore(b"{")


def test_factory_refuses_bad_combinations():
    with pytest.raises(EngineError, match="epsilon applies only"):
        create_engine("relations", "first-order", "1/2")
    with pytest.raises(EngineError, match="always_iterate_s"):
        create_engine("relations", "ivm-eps", always_iterate_s=True)
    with pytest.raises(EngineError, match="unknown strategy"):
        create_engine("relations", "magic")
    with pytest.raises(EngineError, match="graph mode has one relation"):
        create_engine("graph", "ivm-eps", {"R": "0", "S": "0", "T": "1"})
    with pytest.raises(EngineError, match="missing T"):
        create_engine("relations", "ivm-eps", {"R": "0", "S": "0"})
