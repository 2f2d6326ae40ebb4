"""Statistical uniformity of the reservoirs (docs/reservoir/algorithm.md §6.2).

Every strategy promises, after every prefix of the stream, a uniform k-subset of the join's current
results (qualifying under θ). Each test replays one fixed small stream with T seeds (0..T-1, fixed, so
the tests are deterministic), records the sample at an intermediate point and at the end, and tests
each result's inclusion frequency against T·k/M with the corrected χ² of ``stats.inclusion_p_value``.

Significance: each test rejects at p < 1e-4, so a correct sampler fails a given seed set with
probability 1e-4 per checkpoint (about 3e-3 over the whole file). Power: the negative control below
(a reservoir that forgets its pending skip at every batch) is rejected at p < 1e-8 by the same test on
a dummy-heavy stream, and T is chosen so that every expected cell count is at least 20.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ivmstream.events import UpdateEvent
from ivmstream.services.reservoir.sampler import Reservoir
from tests.unit.reservoir.oracle import DUMBBELL, LINE3, STAR3, brute_join, engine, event
from tests.unit.reservoir.stats import inclusion_p_value, multinomial_p_value

ALPHA = 1e-4


def line3_stream(deletes: bool = False) -> list[UpdateEvent]:
    """A skewed little graph: node 0 is a hub, so the rounded counts are loose and batches hold dummies."""
    edges = [(0, 1), (1, 0), (0, 2), (2, 0), (0, 3), (3, 4), (1, 2), (4, 0), (2, 3), (0, 4), (3, 0)]
    out = [event("E", ["src", "dst"], e) for e in edges]
    if deletes:
        out.insert(8, event("E", ["src", "dst"], (0, 2), -1))
        out.insert(9, event("E", ["src", "dst"], (1, 0), -1))
        out.append(event("E", ["src", "dst"], (2, 0), -1))
    return out


def star_stream() -> list[UpdateEvent]:
    rng = random.Random(7)
    out = []
    for _ in range(16):
        rel = rng.choice("RST")
        col = {"R": "a", "S": "b", "T": "c"}[rel]
        out.append(event(rel, ["s", col], (rng.choice([0, 0, 1]), rng.randrange(4))))
    return out


def dumbbell_stream() -> list[UpdateEvent]:
    """Two triangles sharing nothing but a bridge edge, built up in an interleaved order."""
    tri = [((0, 1), (0, 2), (1, 2)), ((0, 1), (0, 3), (1, 3)), ((5, 1), (5, 2), (1, 2))]
    rows: list[tuple[str, tuple[str, str], tuple[int, int]]] = []
    for a, b, c in tri:
        rows += [("R1", ("x1", "x2"), a), ("R2", ("x1", "x3"), b), ("R3", ("x2", "x3"), c)]
        rows += [("R5", ("x4", "x5"), (a[0] + 10, a[1])), ("R6", ("x4", "x6"), (b[0] + 10, b[1]))]
        rows += [("R4", ("x5", "x6"), c)]
    rows += [("R7", ("x3", "x4"), (2, 10)), ("R7", ("x3", "x4"), (3, 10)), ("R7", ("x3", "x4"), (2, 15))]
    rng = random.Random(3)
    rng.shuffle(rows)
    return [event(r, cols, v) for r, cols, v in rows]


def run_trials(
    query: dict[str, Any], stream: Sequence[UpdateEvent], checkpoints: Sequence[int], trials: int, **opts: Any
) -> list[tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]]]]:
    """Per checkpoint (a prefix length): the sample of every trial, and the join then."""
    per: list[list[list[tuple[Any, ...]]]] = [[] for _ in checkpoints]
    joins: list[list[tuple[Any, ...]]] = [[] for _ in checkpoints]
    for seed in range(trials):
        e = engine(query, seed=seed, **opts)
        done = 0
        for i, cut in enumerate(checkpoints):
            e.apply(list(stream[done:cut]))
            done = cut
            per[i].append(e.rows())
            if seed == 0:
                join = brute_join(e)
                joins[i] = sorted(r for r in join if e.theta is None or e.theta(r))
    return list(zip(per, joins, strict=True))


def assert_uniform(
    query: dict[str, Any],
    stream: Sequence[UpdateEvent],
    k: int,
    trials: int,
    checkpoints: Sequence[int] | None = None,
    **opts: Any,
) -> None:
    checkpoints = checkpoints or [len(stream) * 2 // 3, len(stream)]
    for samples, join in run_trials(query, stream, checkpoints, trials, k=k, **opts):
        assert len(join) > k, "the test needs more results than k"
        assert trials * k / len(join) >= 20, "too few trials for the χ² approximation"
        p = inclusion_p_value(samples, join, k)
        assert p > ALPHA, f"inclusion frequencies not uniform over {len(join)} results: p = {p:.2e}"


@pytest.mark.parametrize(
    "strategy", ["rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt", "symhj", "redraw", "rebuild"]
)
def test_line3_is_uniform(strategy: str):
    assert_uniform(LINE3, line3_stream(), k=3, trials=600, strategy=strategy)


def test_line3_with_deletes_is_uniform():
    assert_uniform(LINE3, line3_stream(deletes=True), k=3, trials=600)


def test_line3_with_predicate_is_uniform():
    assert_uniform(LINE3, line3_stream(), k=2, trials=600, predicate="a != d and b != 3")


def test_line3_with_predicate_and_deletes_is_uniform_under_sjoin_opt():
    assert_uniform(
        LINE3, line3_stream(deletes=True), k=2, trials=600, predicate="a != d", strategy="sjoin-opt"
    )


def test_star_is_uniform():
    assert_uniform(STAR3, star_stream(), k=2, trials=600)


def test_dumbbell_is_uniform():
    stream = dumbbell_stream()  # the bridge edges come last: 6 results after 20 events, 8 after 21
    assert_uniform(DUMBBELL, stream, k=2, trials=600, checkpoints=[len(stream) - 1, len(stream)])


def test_with_replacement_slots_are_independent_uniform_draws():
    """Each slot is its own one-result reservoir: pooled over trials, the slots are i.i.d. uniform."""
    stream = line3_stream(deletes=True)
    for samples, join in run_trials(LINE3, stream, [8, len(stream)], 300, k=4, with_replacement=True):
        draws = [r for s in samples for r in s]
        assert len(draws) == 300 * 4
        p = multinomial_p_value(draws, join)
        assert p > ALPHA, f"with-replacement draws not uniform: p = {p:.2e}"


# --- the sampler alone, on a dummy-heavy stream cut into batches, and its negative control ----------


def batched_stream(seed: int = 11) -> list[list[tuple[int] | None]]:
    """200 items, density 0.3 (None = dummy), cut into 26 batches at random points."""
    rng = random.Random(seed)
    items: list[tuple[int] | None] = []
    for _ in range(200):
        items.append((len([x for x in items if x is not None]),) if rng.random() < 0.3 else None)
    cuts = sorted(rng.sample(range(1, 200), 25))
    return [items[a:b] for a, b in zip([0, *cuts], [*cuts, 200], strict=True)]


class ForgetfulReservoir(Reservoir):
    """Negative control: sets the pending skip to 0 at every batch start (forces a stop per batch)."""

    def update(self, n: int, get: Callable[[int], Any]) -> None:
        if self.w is not None:
            self.q = 0
        super().update(n, get)


def sampler_samples(cls: type[Reservoir], k: int, trials: int) -> tuple[list[list[Any]], list[tuple[int]]]:
    batches = batched_stream()
    reals = [x for b in batches for x in b if x is not None]
    out = []
    for seed in range(trials):
        res = cls(k, random.Random(seed))
        for b in batches:
            res.update(len(b), lambda z, b=b: b[z])  # type: ignore[misc]
        out.append(list(res.sample))
    return out, reals


def test_batched_sampler_with_dummies_is_uniform():
    samples, reals = sampler_samples(Reservoir, 3, 1500)
    assert inclusion_p_value(samples, reals, 3) > ALPHA


def test_the_test_rejects_a_sampler_that_forgets_its_skip():
    samples, reals = sampler_samples(ForgetfulReservoir, 3, 1500)
    assert inclusion_p_value(samples, reals, 3) < 1e-8


def test_star_with_deletes_and_predicate_is_uniform():
    stream = star_stream()
    stream = [
        *stream[:10],
        *[event(e.relation, list(e.row), list(e.row.values()), -1) for e in stream[2:4]],
        *stream[10:],
    ]
    # the deletes shrink the join to 1 qualifying result; it has 6 and 12 at the checkpoints
    assert_uniform(STAR3, stream, k=2, trials=600, checkpoints=[14, len(stream)], predicate="a != b")


def test_dumbbell_with_deletes_and_predicate_is_uniform():
    stream = dumbbell_stream()
    # a right triangle loses an edge (2 qualifying results, read while the delete is pending), gets it
    # back (5), and a bridge edge comes (6)
    gone = event("R4", ["x5", "x6"], (1, 2), -1)
    stream = [
        *stream,
        gone,
        *stream[:3],
        event("R4", ["x5", "x6"], (1, 2)),
        event("R7", ["x3", "x4"], (3, 15)),
    ]
    checkpoints = [len(stream) - 5, len(stream) - 1, len(stream)]
    assert_uniform(DUMBBELL, stream, k=1, trials=600, checkpoints=checkpoints, predicate="x1 != 5")
