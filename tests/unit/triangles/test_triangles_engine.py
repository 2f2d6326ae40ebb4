"""Relations mode: every strategy and ε against brute force after every update; IVM^ε invariants,
snapshots, replays and permutations on random update sequences; deliberate workloads and edge cases are in
test_triangles_engine_workloads.py and test_triangles_engine_edges.py.

Section numbers (§) refer to docs/triangles/algorithm.md (invariants §6.2, edge cases §6.4)."""

from __future__ import annotations

import random
from collections import defaultdict
from fractions import Fraction

from hypothesis import event, given, settings
from hypothesis import strategies as st

from ivmstream.services.triangles.ivm_eps import IvmEpsEngine
from tests.unit.triangles.engine_checks import (
    CONFIGS,
    EPSILONS,
    Accounting,
    Brute,
    ev,
    make,
)

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
