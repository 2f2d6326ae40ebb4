"""Deletes and updates without rebuilds (docs/reservoir/algorithm.md §5): uniform k-subsets after every
event of random insert/delete/update streams, and valid samples against brute force.

Uniformity is tested at the level the guarantee is stated: every k-subset of the current join equally
likely. Each test replays one stream (fixed by its seed) with T trial seeds 0..T-1 and, after every
event, tests the T samples: while the join has few enough k-subsets for each to be expected at least
16 times, by a χ² goodness of fit over the subsets themselves; above that, by the corrected
inclusion-frequency χ² of ``stats.inclusion_p_value``; when |Q| <= k the sample must be Q exactly.
Each check rejects at p < 1e-4, so a correct engine fails a stream's 17 to 29 checks with probability
about 3e-3. Power: the negative controls below (a refill that keeps the old threshold w, a refill that
takes J's entries in order instead of at random) must be rejected at p < 1e-8 by the same checks on
the line-3 stream with 300 trials (measured: p = 9e-16 and 3e-128).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.sampler import Reservoir, geo
from tests.unit.reservoir.oracle import LINE3, QUERIES, TWO_TABLE, Model, brute_join, event, options
from tests.unit.reservoir.stats import inclusion_p_value, multinomial_p_value

ALPHA = 1e-4
Row = tuple[Any, ...]


def update_stream(query: dict[str, Any], seed: int, length: int, k: int, most: int) -> list[UpdateEvent]:
    """Inserts, deletes and updates (a delete and an insert in a row) over 3-4 values, one value a hub
    so rounded counts are loose; steered to keep between k + 1 and ``most`` join results where it can
    (more deletes above, more inserts below), so joins shrink, grow and cross k."""
    rng = random.Random(seed)
    probe = ReservoirEngine(options(query, k=k))
    model = Model(probe)
    bases = list(probe.query.bases.items())
    out: list[UpdateEvent] = []

    def fresh() -> tuple[str, tuple[str, ...], Row]:
        while True:
            rel, cols = rng.choice(bases)
            t = tuple(rng.choice([0, 0, 1, 2, 3]) for _ in cols)
            if t not in model.sets[rel]:
                return rel, cols, t

    def present() -> tuple[str, tuple[str, ...], Row]:
        rel, cols = rng.choice([(r, c) for r, c in bases if model.sets[r]])
        return rel, cols, rng.choice(sorted(model.sets[rel]))

    def size() -> int:
        probe.rels = {a: dict.fromkeys(r, 0) for a, r in model.relations().items()}  # all brute_join reads
        return len(brute_join(probe))

    while len(out) < length:
        m = size()
        have = any(model.sets.values())
        kind = (
            "insert"
            if not have or m <= k
            else rng.choice(["delete", "update"] if m > most else ["insert", "delete", "update", "update"])
        )
        steps = []
        if kind in ("delete", "update"):
            steps.append((*present(), -1))
        if kind in ("insert", "update"):
            steps.append((*fresh(), 1))
        for rel, cols, t, delta in steps:
            assert model.apply(rel, t, delta) is None
            out.append(event(rel, cols, t, delta))
    return out


def samples_after_every_event(
    query: dict[str, Any],
    stream: list[UpdateEvent],
    trials: int,
    control: type[Reservoir] | None = None,
    **opts: Any,
) -> list[tuple[list[list[Row]], set[Row]]]:
    """Per event: every trial's sample after it, and the join then."""
    parsed = options(query, **opts)
    per: list[list[list[Row]]] = [[] for _ in stream]
    joins: list[set[Row]] = []
    for seed in range(trials):
        e = ReservoirEngine({**parsed, "seed": seed})
        if control is not None:
            e.sampler = control(e.k, e.rng, e.theta)
        for i, ev in enumerate(stream):
            assert not e.apply([ev])
            per[i].append(e.rows())
            if seed == 0:
                joins.append({r for r in brute_join(e) if e.theta is None or e.theta(r)})
    return list(zip(per, joins, strict=True))


def p_values(
    query: dict[str, Any], stream: list[UpdateEvent], k: int, trials: int, **opts: Any
) -> list[float]:
    """The p-value of every event with more results than k (the others checked exactly)."""
    out = []
    for samples, join in samples_after_every_event(query, stream, trials, k=k, **opts):
        for s in samples:
            assert set(s) <= join and len(s) == len(set(s)) == min(k, len(join))
        if len(join) <= k:
            continue
        population = sorted(join)
        if trials / math.comb(len(join), k) >= 16:
            subsets = [frozenset(s) for s in samples]
            cells = [frozenset(c) for c in _combinations(population, k)]
            out.append(multinomial_p_value(subsets, cells))
        else:
            out.append(inclusion_p_value(samples, population, k))
    return out


def _combinations(population: list[Row], k: int) -> list[tuple[Row, ...]]:
    return list(itertools.combinations(population, k))


STREAMS: dict[str, Callable[[], tuple[dict[str, Any], list[UpdateEvent]]]] = {
    "two": lambda: (TWO_TABLE, update_stream(TWO_TABLE, seed=5, length=40, k=2, most=7)),
    "line3": lambda: (LINE3, update_stream(LINE3, seed=8, length=28, k=2, most=8)),
}


@pytest.mark.parametrize(
    ("shape", "strategy"),
    [("line3", "rsjoin"), ("line3", "sjoin"), ("two", "rsjoin"), ("two", "rsjoin-opt"), ("two", "sjoin-opt")],
)
def test_the_sample_is_a_uniform_k_subset_after_every_event_of_an_update_stream(shape: str, strategy: str):
    query, stream = STREAMS[shape]()
    assert sum(ev.delta == -1 for ev in stream) >= 8, "the stream needs deletes"
    ps = p_values(query, stream, k=2, trials=400, strategy=strategy)
    assert len(ps) >= 10, "the stream needs events with more results than k"
    assert min(ps) > ALPHA, f"not uniform after some event: p = {min(ps):.2e}"


def test_with_a_predicate_the_sample_stays_uniform_over_the_qualifying_results():
    query, stream = STREAMS["line3"]()
    ps = p_values(query, stream, k=1, trials=300, predicate="a != c")
    assert len(ps) >= 10 and min(ps) > ALPHA


def test_with_replacement_every_slot_stays_a_uniform_draw_after_every_event():
    query, stream = STREAMS["two"]()
    for samples, join in samples_after_every_event(query, stream, 300, k=3, with_replacement=True):
        draws = [r for s in samples for r in s]
        assert len(draws) == (900 if join else 0)
        if len(join) > 1:
            p = multinomial_p_value(draws, sorted(join))
            assert p > ALPHA, f"with-replacement draws not uniform: p = {p:.2e}"


# --- negative controls: refills that look plausible and are not uniform -------------------------------


class KeepsOldThreshold(Reservoir):
    """Refills the vacated slots uniformly but keeps w (and the skip): later inserts then enter too
    rarely, since the refilled keys lie above the old w."""

    def evict(self, slots: list[int], n: int, get: Callable[[int], Row | None]) -> None:
        w, q = self.w, self.q
        super().evict(slots, n, get)
        if self.w is not None and w is not None:
            self.w, self.q = w, q


class RefillsInOrder(Reservoir):
    """Refills the vacated slots with J's first unsampled real entries instead of random ones."""

    def evict(self, slots: list[int], n: int, get: Callable[[int], Row | None]) -> None:
        if self.w is None:
            super().evict(slots, n, get)
            return
        found = [r for r in (get(z) for z in range(n)) if r is not None and r not in self.sample]
        if len(found) < len(slots):
            super().evict(slots, n, get)
            return
        for i, row in zip(slots, found[: len(slots)], strict=True):
            self.sample[i] = row
        if self.journal is not None:
            self.journal += slots
        self.q = geo(self.rng, self.w)


@pytest.mark.parametrize("control", [KeepsOldThreshold, RefillsInOrder])
def test_the_checks_reject_a_refill_that_is_not_uniform(control: type[Reservoir]):
    query, stream = STREAMS["line3"]()
    parsed_k = 2
    ps = []
    for samples, join in samples_after_every_event(query, stream, 300, control=control, k=parsed_k):
        if len(join) <= parsed_k:
            continue
        population = sorted(join)
        if 300 / math.comb(len(join), parsed_k) >= 16:
            cells = [frozenset(c) for c in _combinations(population, parsed_k)]
            ps.append(multinomial_p_value([frozenset(s) for s in samples], cells))
        else:
            ps.append(inclusion_p_value(samples, population, parsed_k))
    assert min(ps) < 1e-8


# --- validity against brute force, update-heavy streams ------------------------------------------------


@st.composite
def updates(draw: Any, query: str) -> list[tuple[str, tuple[str, ...], tuple[int, ...], int]]:
    """Mostly updates (delete a present tuple, insert a new one), some plain inserts and deletes."""
    probe = ReservoirEngine(options(QUERIES[query]))
    model = Model(probe)
    rels = list(probe.query.bases.items())
    out: list[tuple[str, tuple[str, ...], tuple[int, ...], int]] = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["update", "update", "insert", "delete"]))
        held = [(r, c, t) for r, c in rels for t in sorted(model.sets[r])]
        if kind in ("update", "delete") and held:
            rel, cols, t = draw(st.sampled_from(held))
            model.apply(rel, t, -1)
            out.append((rel, cols, t, -1))
        if kind in ("update", "insert") or not held:
            rel, cols = draw(st.sampled_from(rels))
            t = tuple(draw(st.integers(0, 2)) for _ in cols)
            if model.apply(rel, t, 1) is None:
                out.append((rel, cols, t, 1))
    return out


@pytest.mark.parametrize("strategy", ["rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt", "symhj", "redraw"])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_update_streams_keep_a_valid_sample_of_the_brute_force_join(strategy: str, data: Any):
    """After every event: sample ⊆ Q_θ, distinct, of size min(k, |Q_θ|); the exact index's |Q|."""
    query = data.draw(st.sampled_from(sorted(QUERIES)))
    k = data.draw(st.sampled_from([1, 3, 20]))
    e = ReservoirEngine(options(QUERIES[query], k=k, strategy=strategy))
    for rel, cols, t, delta in data.draw(updates(query)):
        assert not e.apply([event(rel, cols, t, delta)])
        join = brute_join(e)
        rows = e.rows()
        assert set(rows) <= join and len(rows) == len(set(rows)) == min(k, len(join))
        if strategy in ("sjoin", "sjoin-opt"):
            assert e.join_size() == len(join)


def test_a_delete_that_no_sampled_result_holds_changes_only_the_index():
    """Unsampled results leaving change nothing in the sampler: the sample, w, the pending skip and
    the generator stay as they were (their keys were above w; no coin is needed)."""
    e = ReservoirEngine(options(LINE3, k=2, seed=3))
    edges = [(0, 1), (1, 2), (2, 3), (1, 0), (0, 2), (2, 0), (3, 0), (0, 3), (3, 1)]
    assert not e.apply([event("E", ["src", "dst"], t) for t in edges])
    assert isinstance(e.sampler, Reservoir) and e.sampler.w is not None
    sampled = {edge for r in e.rows() for edge in itertools.pairwise(r)}
    spare = next(t for t in edges if t not in sampled)
    before = (e.rows(), e.sampler.w, e.sampler.q, e.rng.getstate())
    assert not e.apply([event("E", ["src", "dst"], spare, -1)])
    assert (e.rows(), e.sampler.w, e.sampler.q, e.rng.getstate()) == before
    assert e.counters["refills"] == 0
