"""What the relations-mode engine tests share (test_triangles_engine*.py): the strategies and ε
configurations, a brute-force triangle count over Z-relations, and the accounting of rebalancings that
checks invariants I11 and I12 (docs/triangles/algorithm.md §6.2)."""

from __future__ import annotations

from collections import defaultdict

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


def brute_count(rel: dict[str, dict[tuple, int]]) -> int:
    """Σ R(a,b)·S(b,c)·T(c,a) by nested loops over the relations' multiplicity maps."""
    s_by_b = defaultdict(list)
    for (b, c), m in rel["S"].items():
        s_by_b[b].append((c, m))
    t = rel["T"]
    return sum(mr * ms * t.get((c, a), 0) for (a, b), mr in rel["R"].items() for c, ms in s_by_b.get(b, ()))


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
        return brute_count(self.rel)

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
