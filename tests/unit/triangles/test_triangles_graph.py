"""Graph mode: one symmetric edge relation, set semantics, Q = 6·#triangles, checked against networkx;
the self-join rules (incl. self-loop terms) against brute force and three copies.

Section numbers (§) refer to docs/triangles/algorithm.md (graph mode: §2.11)."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.engine import EngineError
from ivmstream.events import UpdateEvent
from ivmstream.services.triangles.engine import create_engine
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine

EPSILONS = ["0", "1/4", "1/3", "1/2", "2/3", "1"]
CONFIGS = [
    *[("ivm-eps", e) for e in EPSILONS],
    ("first-order", None),
    ("first-order-s", None),
    ("factorized", None),
    ("recursive", None),
    ("recompute", None),
]


def make(strategy: str, eps=None, mode: str = "graph"):
    if strategy == "first-order-s":
        return create_engine(mode, "first-order", always_iterate_s=True)
    return create_engine(mode, strategy, eps)


def edge(u, v, m: int = 1) -> UpdateEvent:
    return UpdateEvent("edges", {"src": u, "dst": v}, m)


def nx_triangles(g: nx.Graph) -> int:
    return sum(nx.triangles(g).values()) // 3


def brute_directed(e: dict[tuple, int]) -> int:
    """Q = Σ_{a,b,c} E(a,b)·E(b,c)·E(c,a) over a Z-relation E, by the plain nested loop."""
    out = defaultdict(list)
    for (a, b), m in e.items():
        out[a].append((b, m))
    return sum(m1 * m2 * e.get((c, a), 0) for (a, b), m1 in e.items() for c, m2 in out.get(b, ()))


VERTEX = st.sampled_from([0, 0, 0, 1, 1, *range(2, 16)])  # vertex 0 is a hub
OPS = st.lists(
    st.tuples(
        st.sampled_from(["ins", "ins", "ins", "del", "del", "del-any", "bad"]),
        VERTEX,
        VERTEX,
        st.integers(0, 999),
    ),
    min_size=30,
    max_size=150,
)


def expected(op, g: nx.Graph) -> tuple[UpdateEvent, str | None]:
    """The event for an abstract op and the rejection code the engine must give (None: applied)."""
    kind, u, v, pick = op
    if kind == "del" and g.number_of_edges():
        u, v = sorted(g.edges())[pick % g.number_of_edges()]
        if pick % 2:
            u, v = v, u
        return edge(u, v, -1), None
    if kind == "bad":
        return edge(u, v, (2, -2, 0)[pick % 3]), "bad-multiplicity"
    m = -1 if kind in ("del", "del-any") else 1
    if u == v:
        return edge(u, v, m), "self-loop"
    if m == 1:
        return edge(u, v, m), "duplicate-edge" if g.has_edge(u, v) else None
    return edge(u, v, m), None if g.has_edge(u, v) else "absent-edge"


@settings(max_examples=60)
@given(OPS)
def test_every_strategy_agrees_with_networkx_under_churn(ops):
    g = nx.Graph()
    engines = [make(s, e) for s, e in CONFIGS]
    for op in ops:
        event, code = expected(op, g)
        if code is None:
            u, v = event.row["src"], event.row["dst"]
            if event.delta == 1:
                g.add_edge(u, v)
            else:
                g.remove_edge(u, v)
        tri = nx_triangles(g)
        for engine, config in zip(engines, CONFIGS, strict=True):
            snap = engine.snapshot() if code is not None else None
            refused = engine.apply([event])
            assert [r.code for r in refused] == ([] if code is None else [code]), config
            if snap is not None:
                assert engine.snapshot() == snap  # a refused event changes nothing
            result = engine.result()
            assert (result["count"], result["triangles"]) == (6 * tri, tri), config
            assert result["stats"]["size"] == 2 * g.number_of_edges()
        for engine in engines[: len(EPSILONS)]:
            engine.check_invariants()


def zipf_vertex(rng: random.Random, n: int) -> int:
    return min(int(rng.paretovariate(1.1)) - 1, n - 1)


@pytest.mark.parametrize("eps", EPSILONS)
def test_long_skewed_churn_with_accounting(eps):
    """Seeded power-law churn (L3): grow, churn, shrink; networkx every 20 events; I11/I12 for IVM^ε.

    The accounting engine is driven by directed tuple pairs (apply_tuple) so each touch is counted exactly;
    the event-driven engine must end in the byte-identical state."""
    rng = random.Random(11)
    g = nx.Graph()
    by_events = IvmEpsEngine("graph", eps)
    by_tuples = IvmEpsEngine("graph", eps)
    moves = []
    since: dict[object, int] = defaultdict(int)
    moved: set = set()

    def on_rebalance(info):
        assert info["q_before"] == info["q_after"]  # I12
        if info["kind"] == "major":
            since.clear()
            moved.clear()
            return
        t, x = info["thresholds"], info["value"]
        bound = t.up - t.down if x in moved else (t.up - t.strict if info["to"] == "h" else t.strict - t.down)
        assert since[x] > bound, (info, since[x])  # I11
        moved.add(x)
        since[x] = 0
        moves.append(info["to"])

    by_tuples.on_rebalance = on_rebalance
    n = 80
    peak = 0
    for step in range(2600):
        phase_delete = 0.15 if step < 1200 else 0.5 if step < 1800 else 0.9  # grow, churn, shrink
        if g.number_of_edges() and rng.random() < phase_delete:
            u, v = rng.choice(sorted(g.edges()))
            m = -1
            g.remove_edge(u, v)
        else:
            u, v = zipf_vertex(rng, n), rng.randrange(n)
            if u == v or g.has_edge(u, v):
                continue
            m = 1
            g.add_edge(u, v)
        assert by_events.apply([edge(u, v, m)]) == []
        for x, y in ((u, v), (v, u)):
            since[x] += 1
            by_tuples.apply_tuple("E", x, y, m)
        peak = max(peak, g.number_of_edges())
        if step % 20 == 0:
            assert by_events.result()["triangles"] == nx_triangles(g)
            by_events.check_invariants()
    assert by_events.result()["triangles"] == nx_triangles(g)
    for attr in ("q", "n", "hf", "lf", "views", "minor_up", "minor_down", "major_up", "major_down"):
        assert getattr(by_tuples, attr) == getattr(by_events, attr), attr
    stats = by_events.result()["stats"]
    assert peak > 250 and g.number_of_edges() < 10
    assert stats["major_up"] >= 10 and stats["major_down"] >= 3
    if eps in ("1/4", "1/3", "1/2"):
        assert "h" in moves and "l" in moves, stats


@settings(max_examples=80)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([1, 1, 1, -1, 2, -2, 3])),
        min_size=5,
        max_size=70,
    )
)
def test_self_join_rules_with_self_loops_and_z_multiplicities(updates):
    """Directed Z-relation E with self-loops: the alpha=beta terms 3m²E(alpha,alpha) + m³ (§2.11)."""
    engines = [make(s, e) for s, e in CONFIGS]
    e: dict[tuple, int] = {}
    for x, y, m in updates:
        e[(x, y)] = e.get((x, y), 0) + m
        if not e[(x, y)]:
            del e[(x, y)]
        expect = brute_directed(e)
        for engine, config in zip(engines, CONFIGS, strict=True):
            engine.apply_tuple("E", x, y, m)
            assert engine.q == expect, (config, x, y, m)
    for engine in engines:
        engine.check_invariants()


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=5, max_size=40))
def test_directed_graph_counts_each_3_cycle_three_times(arcs):
    g = nx.DiGraph()
    engine = IvmEpsEngine("graph", "1/2")
    for u, v in arcs:
        if u != v and not g.has_edge(u, v):
            g.add_edge(u, v)
            engine.apply_tuple("E", u, v, 1)
    cycles = sum(1 for c in nx.simple_cycles(g, length_bound=3) if len(c) == 3)
    assert engine.q == 3 * cycles


@settings(max_examples=50)
@given(OPS)
def test_three_copies_equal_the_self_join(ops):
    """Three-copies mode (each directed tuple fed to R, S and T) equals the one-relation engine (§6.3)."""
    g = nx.Graph()
    graph = IvmEpsEngine("graph", "1/3")
    copies = IvmEpsEngine("relations", "1/3")
    for op in ops:
        event, code = expected(op, g)
        if code is not None:
            continue
        u, v, m = event.row["src"], event.row["dst"], event.delta
        g.add_edge(u, v) if m == 1 else g.remove_edge(u, v)
        graph.apply([event])
        for x, y in ((u, v), (v, u)):
            for rel in "RST":
                copies.apply_tuple(rel, x, y, m)
        assert copies.q == graph.q == 6 * nx_triangles(g)  # read only after all copies are applied
    copies.check_invariants()


@settings(max_examples=60)
@given(OPS, st.sampled_from(range(len(CONFIGS))), st.floats(0, 1))
def test_snapshot_restore_continues_identically(ops, which, where):
    strategy, eps = CONFIGS[which]
    g = nx.Graph()
    seq = []
    for op in ops:
        event, code = expected(op, g)
        if code is None:
            u, v = event.row["src"], event.row["dst"]
            g.add_edge(u, v) if event.delta == 1 else g.remove_edge(u, v)
        seq.append(event)
    cut = int(where * len(seq))
    original = make(strategy, eps)
    original.apply(seq[:cut])
    restored = make(strategy, eps)
    restored.restore(original.snapshot())
    for event in seq[cut:]:
        assert [r.code for r in original.apply([event])] == [r.code for r in restored.apply([event])]
        assert restored.result() == original.result()
    assert restored.snapshot() == original.snapshot()
    assert original.result()["triangles"] == nx_triangles(g)


def test_refusals_have_precise_codes_and_change_nothing():
    engine = create_engine("graph", "ivm-eps")
    assert engine.apply([edge(1, 2), edge(2, 3), edge(3, 1)]) == []
    assert engine.result()["triangles"] == 1 and engine.result()["count"] == 6
    batch = [
        edge(2, 1),  # the same undirected edge
        edge(1, 3, -1),
        edge(1, 3, -1),  # gone now
        edge(4, 4),
        edge(1, 4, 2),
        edge(1, 4, 0),
        UpdateEvent("R", {"a": 1, "b": 2}, 1),
        UpdateEvent("edges", {"src": 1}, 1),
        edge(1, 2**64),
        edge(1, None),
    ]
    refused = engine.apply(batch)
    assert [(r.index, r.code) for r in refused] == [
        (0, "duplicate-edge"),
        (2, "absent-edge"),
        (3, "self-loop"),
        (4, "bad-multiplicity"),
        (5, "bad-multiplicity"),
        (6, "unknown-relation"),
        (7, "missing-column"),
        (8, "id-out-of-range"),
        (9, "wrong-type"),
    ]
    assert engine.result()["triangles"] == 0 and engine.result()["stats"]["size"] == 4
    engine.apply([edge(3, 1)])
    assert engine.result()["triangles"] == 1


def test_string_ids_work_in_graph_mode():
    engine = create_engine("graph", "ivm-eps", "1/2")
    engine.apply([edge("alice", "bob"), edge("bob", "carol"), edge("carol", "alice"), edge("carol", "dave")])
    assert engine.result()["triangles"] == 1
    other = create_engine("graph", "ivm-eps", "1/2")
    other.restore(engine.snapshot())
    other.apply([edge("dave", "alice")])
    assert other.result()["triangles"] == 2


def test_build_from_an_edge_list():
    edges = [(u, v) for u, v in itertools.combinations(range(7), 2) if (u * v) % 3 != 1]
    g = nx.Graph(edges)
    for strategy, eps in CONFIGS:
        engine = make(strategy, eps)
        engine.load(edges)
        assert engine.result()["triangles"] == nx_triangles(g)
        engine.check_invariants()
        engine.apply([edge(0, 1, -1)] if g.has_edge(0, 1) else [edge(0, 1)])
        engine.check_invariants()
    ivm = IvmEpsEngine("graph", "1/2")
    ivm.load(edges)
    assert ivm.n == 2 * (2 * len(edges)) + 1
    with pytest.raises(EngineError, match="duplicate edge"):
        IvmEpsEngine("graph").load([(1, 2), (2, 1)])
    with pytest.raises(EngineError, match="self-loop"):
        IvmEpsEngine("graph").load([(1, 1)])
    with pytest.raises(EngineError, match="empty engine"):
        ivm.load([(100, 101)])


def test_graph_engine_stats_name_the_edge_relation():
    engine = create_engine("graph", "ivm-eps", "1/3")
    engine.apply([edge(1, 2)])
    stats = engine.result()["stats"]
    assert stats["size_edges"] == 2 and "theta_strict_edges" in stats and "view_V" in stats
    assert create_engine("graph", "recursive").result()["stats"]["view_W"] == 0
