"""Relations mode: every strategy and ε against brute force after every update; IVM^ε invariants,
rebalancing (minor, major, N doubling/halving), snapshots and edge cases.

Section numbers (§) refer to docs/triangles/algorithm.md (invariants §6.2, edge cases §6.4)."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

import orjson
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ivmstream.engine import Engine, EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.triangles.engine import create_engine
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine

COLS = {"R": ("a", "b"), "S": ("b", "c"), "T": ("c", "a")}
EPSILONS = ["0", "1/4", "1/3", "1/2", "2/3", "1"]
FACTORIZED_EPS = {"R": "1", "S": "0", "T": "1"}
CONFIGS = [
    *[("ivm-eps", e) for e in EPSILONS],
    ("ivm-eps", {"R": "0", "S": "0", "T": "1"}),
    ("ivm-eps", FACTORIZED_EPS),
    ("ivm-eps", {"R": "1/3", "S": "2/3", "T": "1/2"}),
    ("first-order", None),
    ("first-order-s", None),
    ("factorized", None),
    ("recursive", None),
    ("recompute", None),
]


def make(strategy: str, eps=None):
    if strategy == "first-order-s":
        return create_engine("relations", "first-order", always_iterate_s=True)
    return create_engine("relations", strategy, eps)


def ev(rel: str, x, y, m: int) -> UpdateEvent:
    xc, yc = COLS[rel]
    return UpdateEvent(rel, {xc: x, yc: y}, m)


class Brute:
    """Z-relations as dicts and Q = Σ R(a,b)·S(b,c)·T(c,a) by the plain nested loop."""

    def __init__(self) -> None:
        self.rel: dict[str, dict[tuple, int]] = {"R": {}, "S": {}, "T": {}}

    def add(self, rel: str, x, y, m: int) -> None:
        d = self.rel[rel]
        v = d.get((x, y), 0) + m
        if v:
            d[(x, y)] = v
        else:
            d.pop((x, y), None)

    def count(self) -> int:
        s_by_b = defaultdict(list)
        for (b, c), m in self.rel["S"].items():
            s_by_b[b].append((c, m))
        t = self.rel["T"]
        return sum(
            mr * ms * t.get((c, a), 0) for (a, b), mr in self.rel["R"].items() for c, ms in s_by_b.get(b, ())
        )

    def size(self) -> int:
        return sum(len(d) for d in self.rel.values())


class Accounting:
    """I11 and I12 (§6.2) from the on_rebalance hook: spacing of rebalancings, Q unchanged by them."""

    def __init__(self, engine: IvmEpsEngine) -> None:
        engine.on_rebalance = self.on_rebalance
        self.since: dict[tuple, int] = defaultdict(int)  # (relation, value) -> updates since last move
        self.moved: set[tuple] = set()  # values moved in the current N-epoch
        self.since_major = 0
        self.minor = 0
        self.major = 0
        self.trajectory: list[tuple[int, int, int]] = []  # (N before, N after, |D|) per major

    def touch(self, rel: str, x) -> None:
        self.since[(rel, x)] += 1
        self.since_major += 1

    def on_rebalance(self, info: dict) -> None:
        assert info["q_before"] == info["q_after"], f"I12: Q changed by a rebalancing: {info}"
        if info["kind"] == "major":
            self.major += 1
            self.trajectory.append((info["n_before"], info["n"], info["size"]))
            assert self.since_major >= info["n_before"] // 4, f"I11: majors {self.since_major} apart: {info}"
            self.since.clear()
            self.moved.clear()
            self.since_major = 0
            return
        self.minor += 1
        key = (info["relation"], info["value"])
        t = info["thresholds"]
        if key in self.moved:
            bound = t.up - t.down
        elif info["to"] == "h":
            bound = t.up - t.strict
        else:
            bound = t.strict - t.down
        assert self.since[key] > bound, (
            f"I11: {key} moved after {self.since[key]} updates (> {bound}): {info}"
        )
        self.moved.add(key)
        self.since[key] = 0


# --- random update sequences ----------------------------------------------------------------------

VALUES = st.sampled_from([0, 0, 0, 0, 1, 1, *range(2, 12)])  # skewed: 0 and 1 get heavy
OPS = st.lists(
    st.tuples(
        st.sampled_from(["ins", "ins", "del", "del", "other"]),
        st.sampled_from("RST"),
        VALUES,
        VALUES,
        st.sampled_from([-1, 2, -2, 3]),
        st.integers(0, 1000),
    ),
    min_size=40,
    max_size=150,
)
INITIAL = st.lists(
    st.tuples(st.sampled_from("RST"), VALUES, VALUES, st.sampled_from([1, 1, 2, -1])), max_size=30
)


def concrete(op, brute: Brute) -> tuple[str, object, object, int]:
    """Mix of §6.3: delete-to-zero of a present tuple, +1 inserts, other multiplicities (Z semantics)."""
    kind, rel, x, y, other, pick = op
    if kind == "del":
        present = sorted(brute.rel[rel])
        if present:
            x, y = present[pick % len(present)]
            return rel, x, y, -brute.rel[rel][(x, y)]
        return rel, x, y, 1
    return rel, x, y, 1 if kind == "ins" else other


def consolidated(initial) -> dict[str, dict[tuple, int]]:
    out: dict[str, dict[tuple, int]] = {"R": {}, "S": {}, "T": {}}
    for rel, x, y, m in initial:
        out[rel][(x, y)] = out[rel].get((x, y), 0) + m
    return {r: {t: m for t, m in d.items() if m} for r, d in out.items()}


@settings(max_examples=120)
@given(OPS, INITIAL)
def test_every_strategy_matches_brute_force_after_every_update(ops, initial):
    brute = Brute()
    d0 = consolidated(initial)
    for rel, tuples in d0.items():
        for (x, y), m in tuples.items():
            brute.add(rel, x, y, m)
    engines = [make(s, e) for s, e in CONFIGS]
    for engine in engines:
        if d0:
            engine.load(d0)
    ivm = [e for e in engines if isinstance(e, IvmEpsEngine)]
    books = [Accounting(e) for e in ivm]
    for e in ivm:
        e.check_invariants()  # BUILD is strict
    for op in ops:
        rel, x, y, m = concrete(op, brute)
        brute.add(rel, x, y, m)
        for book in books:
            book.touch(rel, x)
        expect = brute.count()
        size = brute.size()
        for engine, (strategy, eps) in zip(engines, CONFIGS, strict=True):
            assert engine.apply([ev(rel, x, y, m)]) == []
            result = engine.result()
            assert result["count"] == expect, (strategy, eps, rel, x, y, m)
            assert result["stats"]["size"] == size
        for e in ivm:
            e.check_invariants()
    event("minor moves" if any(b.minor for b in books) else "no minor move")
    event("halving" if any(e.major_down for e in ivm) else "no halving")


@settings(max_examples=80)
@given(OPS, st.sampled_from(range(len(CONFIGS))), st.floats(0, 1))
def test_snapshot_restore_continues_identically(ops, which, where):
    strategy, eps = CONFIGS[which]
    brute = Brute()
    seq = []
    for op in ops:
        rel, x, y, m = concrete(op, brute)
        brute.add(rel, x, y, m)
        seq.append(ev(rel, x, y, m))
    cut = int(where * len(seq))
    original = make(strategy, eps)
    original.apply(seq[:cut])
    snap = original.snapshot()
    restored = make(strategy, eps)
    restored.restore(snap)
    assert restored.snapshot() == snap
    assert restored.result() == original.result()
    for item in seq[cut:]:
        original.apply([item])
        restored.apply([item])
        assert restored.result() == original.result()  # count and every counter, incl. rebalancing
    assert restored.snapshot() == original.snapshot()
    if hasattr(restored, "check_invariants"):
        restored.check_invariants()


@settings(max_examples=60)
@given(OPS, st.integers(0, 90))
def test_build_then_replay_suffix_equals_replay_all(ops, cut):
    brute = Brute()
    seq = []
    for op in ops:
        rel, x, y, m = concrete(op, brute)
        brute.add(rel, x, y, m)
        seq.append((rel, x, y, m))
    cut = min(cut, len(seq))
    for strategy, eps in (("ivm-eps", "1/2"), ("ivm-eps", "1/4"), ("recursive", None)):
        everything = make(strategy, eps)
        everything.apply([ev(*t) for t in seq])
        built = make(strategy, eps)
        built.load(consolidated(seq[:cut]))
        built.check_invariants()
        built.apply([ev(*t) for t in seq[cut:]])
        built.check_invariants()
        assert built.result()["count"] == everything.result()["count"] == brute.count()


@settings(max_examples=40)
@given(OPS, st.randoms(use_true_random=False))
def test_final_count_is_invariant_under_permutation(ops, rnd):
    brute = Brute()
    seq = []
    for op in ops:
        rel, x, y, m = concrete(op, brute)
        brute.add(rel, x, y, m)
        seq.append(ev(rel, x, y, m))
    shuffled = list(seq)
    rnd.shuffle(shuffled)
    for strategy, eps in (("ivm-eps", "1/2"), ("ivm-eps", "1/3"), ("first-order", None)):
        a, b = make(strategy, eps), make(strategy, eps)
        a.apply(seq)
        b.apply(shuffled)
        assert a.result()["count"] == b.result()["count"] == brute.count()


def zipf_value(rng: random.Random, n: int = 30) -> int:
    return min(int(rng.paretovariate(1.2)) - 1, n - 1)


def test_skewed_sweep_exercises_every_kind_of_rebalancing():
    """Seeded Zipf(1.2) sweeps (§6.3): Q and invariants hold, and rebalancing really happens."""
    for eps in EPSILONS:
        totals = defaultdict(int)
        for seed in range(12):
            rng = random.Random(seed)
            engine = IvmEpsEngine("relations", eps)
            book = Accounting(engine)
            brute = Brute()
            for step in range(500):
                rel = rng.choice("RRRST")
                present = brute.rel[rel]
                if present and rng.random() < 0.3 + 0.45 * (step > 300):  # grow, then shrink
                    x, y = rng.choice(sorted(present))
                    m = -present[(x, y)]
                else:
                    x, y = zipf_value(rng), rng.randrange(150)
                    m = 1 if rng.random() < 0.9 else rng.choice([-1, 2, 3])
                brute.add(rel, x, y, m)
                book.touch(rel, x)
                engine.apply([ev(rel, x, y, m)])
                if step % 5 == 0:
                    assert engine.result()["count"] == brute.count()
                    engine.check_invariants()
            stats = engine.result()["stats"]
            for name in ("minor_up", "minor_down", "major_up", "major_down"):
                totals[name] += stats[name]
        assert totals["major_up"] > 0 and totals["major_down"] > 0, (eps, dict(totals))
        if Fraction(eps) not in (0, 1):
            assert totals["minor_up"] > 0 and totals["minor_down"] > 0, (eps, dict(totals))
        else:
            assert totals["minor_up"] == totals["minor_down"] == 0


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
