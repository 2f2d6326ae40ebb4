"""Relations mode on deliberate workloads: major rebalancings as the universe grows and shrinks, the
N trajectory of the documented example, skewed hubs, view space, degree oscillation damped by
hysteresis, minor rebalancing (docs/triangles/algorithm.md §6)."""

from __future__ import annotations

import random

import pytest

from ivmstream.services.triangles.engine import create_engine
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine
from tests.unit.triangles.engine_checks import (
    EPSILONS,
    FACTORIZED_EPS,
    Accounting,
    Brute,
    ev,
)

# --- deliberate workloads ---------------------------------------------------------------------------


def grow_shrink_universe() -> list[tuple[str, int, int]]:
    rng = random.Random(7)
    tuples = [
        (rel, x, y)
        for rel in "RST"
        for x in range(8)
        for y in range(8)
        if x == 0 or y == 0 or (x + y) % 3 == 0
    ]
    rng.shuffle(tuples)
    return tuples


@pytest.mark.parametrize("eps", [*EPSILONS, FACTORIZED_EPS], ids=str)
def test_grow_and_shrink_across_many_major_rebalancings(eps):
    """W-grow/W-shrink twice: every doubling and halving of N, Q and invariants after every update."""
    universe = grow_shrink_universe()
    engine = IvmEpsEngine("relations", eps)
    book = Accounting(engine)
    brute = Brute()
    ns = []
    for cycle in range(2):
        order = universe if cycle == 0 else list(reversed(universe))
        for rel, x, y in order:  # grow
            brute.add(rel, x, y, 1)
            book.touch(rel, x)
            engine.apply([ev(rel, x, y, 1)])
            assert engine.result()["count"] == brute.count()
            engine.check_invariants()
        ns.append(engine.n)
        for rel, x, y in order:  # shrink to empty
            brute.add(rel, x, y, -1)
            book.touch(rel, x)
            engine.apply([ev(rel, x, y, -1)])
            assert engine.result()["count"] == brute.count()
            engine.check_invariants()
        assert engine.result()["count"] == 0
        assert engine.n in (1, 2)
    stats = engine.result()["stats"]
    assert 64 <= len(universe) < 128
    assert ns == [128, 128]  # N doubles when |D| reaches 1, 2, 4, …, 64
    # Shrinking from N=128: |D| < N//4 at |D| = 31, 14, 6, 2, 0 gives N = 63, 30, 14, 6, 2.
    assert book.trajectory == [
        *[(n, 2 * n, n) for n in (1, 2, 4, 8, 16, 32, 64)],
        (128, 63, 31),
        (63, 30, 14),
        (30, 14, 6),
        (14, 6, 2),
        (6, 2, 0),
        *[(n, 2 * n, n) for n in (2, 4, 8, 16, 32, 64)],
        (128, 63, 31),
        (63, 30, 14),
        (30, 14, 6),
        (14, 6, 2),
        (6, 2, 0),
    ]
    assert (stats["major_up"], stats["major_down"]) == (13, 10)
    assert book.major == stats["major_rebalances"]
    assert stats["view_entries"] == 0 and stats["size"] == 0


def test_n_trajectory_matches_the_documented_example():
    """§2.7: N doubles as |D| reaches 1, 2, 4, 8; at N=16 dropping to |D|=3 gives N=7; next doubling at 7."""
    engine = IvmEpsEngine("relations", "1/2")
    assert engine.n == 1
    seen = []
    for i in range(8):
        engine.apply([ev("R", i, 0, 1)])
        seen.append(engine.n)
    assert seen == [2, 4, 4, 8, 8, 8, 8, 16]
    for i in range(8, 4, -1):  # |D| 8 → 4: 4 < 16 // 4 is false
        engine.apply([ev("R", i - 1, 0, -1)])
        assert engine.n == 16
    engine.apply([ev("R", 3, 0, -1)])  # |D| = 3 < 4
    assert engine.n == 7
    for i in range(3, 6):
        engine.apply([ev("R", i, 0, 1)])
        assert engine.n == 7
    engine.apply([ev("R", 6, 0, 1)])  # |D| = 7 = N
    assert engine.n == 14
    engine.check_invariants()


def hub_fixture(k: int) -> dict[str, dict[tuple, int]]:
    """W-hub (§7): S = {(b*, c_i)}, T = {(c_i, a*)}; each c_i has degree 1 in T."""
    return {"S": {("b*", f"c{i}"): 1 for i in range(k)}, "T": {(f"c{i}", "a*"): 1 for i in range(k)}}


def test_skew_hub_pair_is_one_lookup_for_ivm_eps_and_linear_for_classical():
    """W-hub (§7): the hub pair is Θ(N) for classical IVM and O(1) for IVM^ε via V_ST."""
    k = 200
    engines = {
        "ivm": create_engine("relations", "ivm-eps", "1/2"),
        "first-order": create_engine("relations", "first-order"),
        "first-order-s": create_engine("relations", "first-order", always_iterate_s=True),
        "factorized": create_engine("relations", "factorized"),
        "recursive": create_engine("relations", "recursive"),
    }
    for engine in engines.values():
        engine.load(hub_fixture(k))
    assert engines["ivm"].hf[1].keys() == {"b*"} and not engines["ivm"].hf[2]  # b* heavy in S, T light
    for step in range(40):
        m = 1 if step % 2 == 0 else -1
        for engine in engines.values():
            engine.apply([ev("R", "a*", "b*", m)])
        counts = {name: e.result()["count"] for name, e in engines.items()}
        assert set(counts.values()) == {k if m == 1 else 0}
        work = {name: e.result()["stats"]["work_last"] for name, e in engines.items()}
        assert work["ivm"] == 1 and work["factorized"] == 1
        assert work["first-order"] == work["first-order-s"] == k
        assert work["recursive"] == 1 + 2 * k  # O(1) delta, O(N) maintenance of W_RS and W_TR
    assert engines["ivm"].result()["stats"]["minor_rebalances"] == 0
    assert engines["ivm"].result()["stats"]["major_rebalances"] == 0


@pytest.mark.parametrize("via", ["build", "stream"])
def test_view_space_on_w_viewsat(via):
    """W-viewsat (§7) at k=16: |D| = 1.5k² and |V_RS| = k³/8, after BUILD and after streaming from empty."""
    k = 16
    b0 = range(4 * k)
    data = {
        "R": {(f"a{i}", b): 1 for i in range(k // 8) for b in b0},
        "S": {(b, f"c{b}_{j}"): 1 for b in b0 for j in range(k // 4)},
    }
    engine = IvmEpsEngine("relations", "1/2")
    if via == "build":
        engine.load(data)
    else:
        tuples = [(rel, x, y) for rel, d in data.items() for (x, y) in d]
        random.Random(4).shuffle(tuples)
        engine.apply([ev(rel, x, y, 1) for rel, x, y in tuples])
    stats = engine.result()["stats"]
    assert stats["size"] == 3 * k * k // 2
    assert stats["view_RS"] == k**3 // 8 and stats["view_ST"] == stats["view_TR"] == 0
    assert stats["heavy_values_R"] == k // 8 and stats["heavy_values_S"] == 0
    engine.check_invariants()


def osc_fixture() -> dict[str, dict[tuple, int]]:
    """40 S-rows of 5 light tuples and T(c, alpha) for 5 c's: each R(alpha, j) closes 5 triangles."""
    return {
        "S": {(j, c): 1 for j in range(40) for c in range(5)},
        "T": {(c, "x0"): 1 for c in range(5)},
    }


def test_degree_oscillation_is_damped_by_hysteresis():
    """W-osc (§7, §2.10): oscillating inside (θ_down, θ_up) never moves; full swings move once each."""
    engine = IvmEpsEngine("relations", "1/2")
    book = Accounting(engine)
    engine.load(osc_fixture())
    brute = Brute()
    for rel, tuples in osc_fixture().items():
        for (x, y), m in tuples.items():
            brute.add(rel, x, y, m)
    t = engine.thr[0]
    assert (engine.n, t) == (411, (21, 31, 11))
    deg = 0

    def step(m: int) -> None:
        nonlocal deg
        j = deg if m == 1 else deg - 1
        brute.add("R", "x0", j, m)
        book.touch("R", "x0")
        engine.apply([ev("R", "x0", j, m)])
        deg += m
        assert engine.result()["count"] == brute.count() == 5 * deg
        engine.check_invariants()

    while deg < t.up:  # light until θ_up: one promotion, exactly at θ_up
        step(1)
    assert book.minor == 1 and "x0" in engine.hf[0] and len(engine.hf[0]["x0"]) == t.up
    assert {("x0", c) for c in range(5)} <= engine.views[0].keys()  # V_RS(alpha, ·) = Σ_b R_h·S_l
    while deg > t.strict - 2:
        step(-1)
    for _ in range(10):  # oscillate θ ± 2, well inside the hysteresis band
        while deg < t.strict + 2:
            step(1)
        while deg > t.strict - 2:
            step(-1)
    assert book.minor == 1
    updates = 0
    for _ in range(4):  # full swings: below θ_down, then up to θ_up
        while deg >= t.down:
            step(-1)
            updates += 1
        while deg < t.up:
            step(1)
            updates += 1
    assert book.minor == 1 + 8
    # about one move per θ_up - θ_down updates, never one per update
    assert 1 + updates // (t.up - t.down) >= 8
    assert engine.major_up + engine.major_down == 0


def test_minor_rebalancing_moves_the_whole_row_and_keeps_q():
    """Minor moves iterate a row they mutate (§2.8): all of alpha's tuples move, Q stays, views follow."""
    engine = IvmEpsEngine("relations", "1/2")
    engine.load(osc_fixture())
    events = []
    engine.on_rebalance = events.append
    for j in range(31):
        engine.apply([ev("R", "x0", j, 1 + j % 3)])  # multiplicities 1..3 must move intact
    [info] = events
    assert info["kind"] == "minor" and info["to"] == "h" and info["moved"] == 31
    assert info["q_before"] == info["q_after"]
    assert "x0" not in engine.lf[0] and engine.hf[0]["x0"] == {j: 1 + j % 3 for j in range(31)}
    assert all(engine.hb[0][j] == {"x0": 1 + j % 3} for j in range(31))
    engine.check_invariants()
    # The move changed views: V_RS(x0, ·) gained R_h(x0, ·)·S_l (and V_TR lost T_h(·, x0)·R_l(x0, ·) = 0).
    assert engine.views[0][("x0", 0)] == sum(1 + j % 3 for j in range(31))
