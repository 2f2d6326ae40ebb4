"""Strategy ``auto`` (docs/triangles/algorithm.md §4.7): exact against brute force across plan
switches (forced and chosen), deletes, multiplicities and threshold crossings of the IVM^ε plan;
identical continuation after snapshot or incremental-state restore; the plan it picks on workloads
where one plan is clearly cheapest, with the reason in the stats."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import event, given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.triangles.auto import AutoEngine, CostModel, plan_names
from ivmstream.services.triangles.base import TriangleEngine
from ivmstream.services.triangles.baselines import FirstOrderEngine, ViewEngine
from ivmstream.services.triangles.engine import create_engine
from tests.unit.triangles.engine_checks import brute_count

COLS = {"R": ("a", "b"), "S": ("b", "c"), "T": ("c", "a")}
# Rebuilds priced at nothing: any update that another plan would do more cheaply triggers a switch.
TWITCHY = CostModel(
    rebuild_fixed=0, rebuild_per_tuple=0, rebuild_per_view_entry=0, eps_rebuild_per_tuple=0, sample_stride=1
)


def ev(rel: str, x, y, m: int) -> UpdateEvent:
    xc, yc = COLS[rel]
    return UpdateEvent(rel, {xc: x, yc: y}, m)


def edge(u, v, m: int) -> UpdateEvent:
    return UpdateEvent("edges", {"src": u, "dst": v}, m)


def brute_graph(edges: set[tuple[int, int]]) -> int:
    adj: dict[int, set[int]] = defaultdict(set)
    for u, v in edges:
        adj[u].add(v)
        adj[v].add(u)
    return sum(1 for u in adj for v in adj[u] for w in adj[v] if u in adj[w])  # ordered: 6 per triangle


VALUES = st.sampled_from([0, 0, 0, 0, 1, 1, *range(2, 12)])  # skewed: 0 and 1 cross the thresholds
OPS = st.lists(
    st.tuples(
        st.sampled_from(["ins", "ins", "del", "del", "other"]),
        st.sampled_from("RST"),
        VALUES,
        VALUES,
        st.sampled_from([-1, 2, -2, 3]),
        st.integers(0, 1000),
        st.sampled_from([None] * 12 + list(plan_names(False))),  # sometimes force a switch first
    ),
    min_size=40,
    max_size=150,
)


def concrete(op, rel_state: dict[str, dict[tuple, int]]) -> tuple[str, object, object, int]:
    kind, rel, x, y, other, pick, _ = op
    if kind == "del":
        present = sorted(rel_state[rel])
        if present:
            x, y = present[pick % len(present)]
            return rel, x, y, -rel_state[rel][(x, y)]
        return rel, x, y, 1
    return rel, x, y, 1 if kind == "ins" else other


def add(rel_state, rel, x, y, m) -> None:
    d = rel_state[rel]
    v = d.get((x, y), 0) + m
    if v:
        d[(x, y)] = v
    else:
        d.pop((x, y), None)


@settings(max_examples=100, deadline=None)
@given(OPS, st.booleans())
def test_exact_after_every_update_across_forced_and_chosen_switches(ops, twitchy):
    rel_state: dict[str, dict[tuple, int]] = {"R": {}, "S": {}, "T": {}}
    engine = AutoEngine("relations", TWITCHY if twitchy else CostModel())
    plans_seen = set()
    for op in ops:
        if op[-1] is not None:
            engine.switch_to(op[-1])
            engine.check_invariants()
        rel, x, y, m = concrete(op, rel_state)
        add(rel_state, rel, x, y, m)
        assert engine.apply([ev(rel, x, y, m)]) == []
        result = engine.result()
        assert result["count"] == brute_count(rel_state)
        assert result["stats"]["size"] == sum(len(d) for d in rel_state.values())
        assert result["stats"]["plan"] == engine.plan_name
        # The fast path (gauges kept per switch, the plan's counters read directly) equals the base
        # class's stats built from scratch, names and order included.
        assert list(engine.stats_exact().items()) == list(TriangleEngine.stats_exact(engine).items())
        plans_seen.add(engine.plan_name)
    engine.check_invariants()
    event(f"{len(plans_seen)} plans")
    event("ivm-eps rebalanced" if engine.result()["stats"].get("minor_rebalances") else "no minor move")


def _sequence(ops):
    rel_state: dict[str, dict[tuple, int]] = {"R": {}, "S": {}, "T": {}}
    seq = []
    for op in ops:
        rel, x, y, m = concrete(op, rel_state)
        add(rel_state, rel, x, y, m)
        seq.append(ev(rel, x, y, m))
    return seq


def same_state(got: AutoEngine, want: AutoEngine, via_entries: bool) -> None:
    """Same result and entries; snapshot bytes too unless restored from entries (which come in any
    order, and a snapshot lists rows in the order they were built)."""
    assert got.result() == want.result()
    assert sorted(got.all_entries()) == sorted(want.all_entries())
    if not via_entries:
        assert got.snapshot() == want.snapshot()


@settings(max_examples=60, deadline=None)
@given(OPS, st.floats(0, 1), st.booleans())
def test_snapshot_and_entries_restore_continue_identically(ops, where, via_entries):
    """The chosen plan, its state and the decision state come back, so later choices are the same."""
    seq = _sequence(ops)
    cut = int(where * len(seq))
    original = AutoEngine("relations", TWITCHY)
    stored: dict[tuple[str, bytes], bytes] = {}
    for i, item in enumerate(seq[:cut]):
        original.apply([item])
        if i % 7 == 0 or i == cut - 1:
            for m, key, value in original.changed_entries():
                if value is None:
                    stored.pop((m, key), None)
                else:
                    stored[(m, key)] = value
    restored = AutoEngine("relations", TWITCHY)
    if via_entries and cut:
        restored.restore_entries([(m, k, v) for (m, k), v in sorted(stored.items())])
    else:
        restored.restore(original.snapshot())
    same_state(restored, original, via_entries)
    assert list(restored.stats_exact().items()) == list(TriangleEngine.stats_exact(restored).items())
    for item in seq[cut:]:
        original.apply([item])
        restored.apply([item])
        assert restored.result() == original.result()
    same_state(restored, original, via_entries)
    restored.check_invariants()
    event("switched" if original.switches else "no switch")


GRAPH_OPS = st.lists(
    st.tuples(st.integers(0, 9), st.integers(0, 9), st.booleans()), min_size=20, max_size=120
)


@settings(max_examples=60, deadline=None)
@given(GRAPH_OPS)
def test_graph_mode_is_exact_across_switches(ops):
    engine = AutoEngine("graph", TWITCHY)
    edges: set[tuple[int, int]] = set()
    for i, (u, v, force) in enumerate(ops):
        if u == v:
            continue
        e = (min(u, v), max(u, v))
        m = -1 if e in edges else 1
        (edges.discard if m < 0 else edges.add)(e)
        if force:
            engine.switch_to(plan_names(True)[i % 2])
        assert engine.apply([edge(u, v, m)]) == []
        assert engine.result()["count"] == brute_graph(edges)
    engine.check_invariants()


def _hub(k: int) -> dict[str, dict[tuple, int]]:
    """R(a*, b*) with S(b*, c_i), T(c_i, a*): first-order walks k entries per update to R."""
    return {
        "R": {(1, 2): 1},
        "S": {(2, 10 + i): 1 for i in range(k)},
        "T": {(10 + i, 1): 1 for i in range(k)},
    }


def test_updates_to_one_relation_over_a_hub_choose_the_view_that_answers_them():
    engine = create_engine("relations", "auto")
    engine.load(_hub(3000))
    m = -1
    for _ in range(200):
        engine.apply([ev("R", 1, 2, m)])
        m = -m
    stats = engine.result()["stats"]
    assert stats["plan"] == "view-ST"  # V_ST(b, a) = Σ_c S(b,c)·T(c,a) answers updates to R
    assert "first-order" in stats["plan_reason"] and stats["plan_switches"] == 1


def test_updates_to_every_relation_over_hubs_choose_ivm_eps():
    """A hub for each relation's updates: every single-view plan must maintain a long row on two of
    three updates, first-order intersects long rows on all three; IVM^ε does O(√N) per update."""
    k = 3000
    data: dict[str, dict[tuple, int]] = {"R": {}, "S": {}, "T": {}}
    a, b, c = 1, 2, 3
    for i in range(k):
        data["S"][(b, 10 + i)] = data["T"][(10 + i, a)] = 1  # serves updates to R(a, b)
        data["T"][(c, 10 + k + i)] = data["R"][(10 + k + i, b)] = 1  # to S(b, c)
        data["R"][(a, 10 + 2 * k + i)] = data["S"][(10 + 2 * k + i, c)] = 1  # to T(c, a)
    engine = create_engine("relations", "auto")
    engine.load(data)
    for i in range(1200):
        rel = "RST"[i % 3]
        x, y = {"R": (a, b), "S": (b, c), "T": (c, a)}[rel]
        engine.apply([ev(rel, x, y, 1 if (i // 3) % 2 == 0 else -1)])
    assert engine.result()["stats"]["plan"] == "ivm-eps"


def test_sparse_random_updates_stay_with_first_order():
    import random

    rng = random.Random(3)
    engine = create_engine("relations", "auto")
    for _ in range(3000):
        engine.apply([ev(rng.choice("RST"), rng.randrange(500), rng.randrange(500), 1)])
    stats = engine.result()["stats"]
    assert stats["plan"] == "first-order" and stats["plan_switches"] == 0
    assert stats["plan_reason"].startswith("initial plan")


def test_a_switch_between_first_order_and_a_view_plan_hands_the_indexes_over():
    """Only the view is built (docs/triangles/algorithm.md §4.7): the rows stay where they are, and
    the view equals its recomputation from them."""
    engine = AutoEngine("relations")
    engine.load(_hub(50))
    plan = engine.plan
    assert isinstance(plan, FirstOrderEngine)
    fwd, bwd = plan.fwd, plan.bwd
    for name in ("view-ST", "first-order"):
        engine.switch_to(name)
        assert isinstance(engine.plan, FirstOrderEngine | ViewEngine)
        assert engine.plan.fwd is fwd and engine.plan.bwd is bwd
        engine.check_invariants()
    engine.apply([ev("R", 1, 2, -1)])
    assert engine.result()["count"] == brute_count({**_hub(50), "R": {}})
    engine.check_invariants()


@settings(max_examples=40, deadline=None)
@given(GRAPH_OPS, st.integers(1, 40))
def test_graph_batches_that_switch_mid_batch_check_events_against_the_current_plan(ops, batch):
    """Switches happen inside ``apply`` (rebuilds priced at nothing): the set-semantics checks of the
    later events in the batch must read the plan that holds the edges by then."""
    engine = AutoEngine("graph", TWITCHY)
    edges: set[tuple[int, int]] = set()
    events = []
    for u, v, _ in ops:
        if u == v:
            continue
        e = (min(u, v), max(u, v))
        m = -1 if e in edges else 1
        (edges.discard if m < 0 else edges.add)(e)
        events.append(edge(u, v, m))
    for i in range(0, len(events), batch):
        assert engine.apply(events[i : i + batch]) == []
    assert engine.result()["count"] == brute_graph(edges)
    engine.check_invariants()
