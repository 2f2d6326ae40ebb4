"""The paper's §6 experiments beyond line-3/4 (bench/reservoir.py runs them into one report):

* **queries** (Figure 5): line-3/4/5, star-4/5/6 and the dumbbell over an Epinions-like graph fed as
  the paper's shuffled alias copies; TPC-DS-shaped QX/QY/QZ and an LDBC-like Q10 with their keys;
  every strategy that fits the budget (rsjoin, sjoin, the -opt variants where foreign keys exist,
  symhj); each beside its update stream (the same events, the second half each preceded by the delete
  of a random live streamed tuple: change data's update = delete + insert).
* **optimisations** (Figure 9): propagation-loop iterations and time on QZ, without optimisation,
  with the foreign-key merge alone (declared bags, rsjoin), grouping alone (rsjoin-opt without keys)
  and both (rsjoin-opt with keys).
* **scale** (Figure 10): QZ at growing scales, rsjoin and rsjoin-opt.
* **graphs**: line-3 on the Epinions-like graph beside Chung-Lu, each fed as shuffled alias copies and
  by the service's fan-out; the full-size graphs' shapes against Epinions' published statistics.
* **worker points**: a query of each family through the real Worker at its batch size.

Times are wall seconds of ``engine.apply`` (per event and in total); a run past its budget stops there
and says how far it got. Counters (propagation-loop iterations, places, stops) do not depend on the
machine.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence
from typing import Any

from bench.reservoir_data import chung_lu
from bench.reservoir_graphs import (
    EPINIONS_EDGES,
    EPINIONS_NODES,
    GRAPH_QUERIES,
    degree_stats,
    epinions_like,
    line,
    stream_for,
)
from bench.reservoir_relational import RELATIONAL, qz
from ivmstream.events import UpdateEvent
from ivmstream.options import parse_options
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.options import OPTIONS
from ivmstream.services.reservoir.query import fk_merge, parse_query

COUNTERS = ("places", "propagations", "retrieves", "stops_real", "stops_dummy", "deletes", "rebuilds")
GRAPH_STRATEGIES = ("rsjoin", "sjoin", "symhj")
RELATIONAL_STRATEGIES = ("rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt", "symhj")
UPDATE_STRATEGIES = ("rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt")
SYMHJ_MAX_RESULTS = 5_000_000
# redraw (k fresh draws after every event) and rebuild (the exact index rebuilt after every event) run
# on one query of each family: per event they cost O(k log N) and O(N), which the budget cuts anyway
REDRAWING = {"line-3": ("redraw", "rebuild"), "QX": ("redraw", "rebuild")}


def options_of(raw: dict[str, Any]) -> dict[str, Any]:
    return parse_options(OPTIONS, raw, owner="bench")


def update_stream(events: Sequence[UpdateEvent], seed: int = 5) -> list[UpdateEvent]:
    """The first half of ``events`` as given; each later insert preceded by the delete of a uniformly
    random tuple inserted before it and still present."""
    rng = random.Random(seed)
    half = len(events) // 2
    live: list[UpdateEvent] = list(events[:half])
    out = list(live)
    for ev in events[half:]:
        j = rng.randrange(len(live))
        gone = live[j]
        live[j] = live[-1]
        live.pop()
        out.append(UpdateEvent(gone.relation, gone.row, -1))
        out.append(ev)
        live.append(ev)
    return out


def run(
    raw: dict[str, Any],
    preload: Sequence[UpdateEvent],
    events: Sequence[UpdateEvent],
    budget: float,
) -> dict[str, Any]:
    """``preload`` untimed, then ``events`` in chunks until done or past ``budget`` seconds (small
    chunks for the baselines whose events cost O(N) or more, so a chunk never runs far past it)."""
    chunk = 10 if raw["strategy"] in ("symhj", "redraw", "rebuild") else 200
    engine = ReservoirEngine(options_of(raw))
    rejected = len(engine.apply(list(preload)))
    gc.collect()
    spent, done = 0.0, 0
    while done < len(events):
        part = events[done : done + chunk]
        t0 = time.perf_counter()
        rejected += len(engine.apply(part))
        spent += time.perf_counter() - t0
        done += len(part)
        if spent > budget and done < len(events):
            break
    stats = engine.stats()
    return {
        "strategy": raw["strategy"],
        "events": len(events),
        "processed": done,
        "timed_out": done < len(events),
        "rejected": rejected,
        "seconds": spent,
        "us_per_event": 1e6 * spent / max(1, done),
        "sample_size": int(stats["sample_size"]),
        "join_size_bound": engine.join_size_bound(),
        "exact_size": engine.known_size,
        **{c: int(stats.get(c, 0)) for c in COUNTERS},
    }


def _pair(
    raw: dict[str, Any],
    preload: list[UpdateEvent],
    events: list[UpdateEvent],
    budget: float,
    with_updates: bool,
) -> dict[str, Any]:
    row = {"inserts": run(raw, preload, events, budget)}
    if with_updates:
        row["updates"] = run(raw, preload, update_stream(events), budget)
        row["updates"]["update_over_insert_per_event"] = row["updates"]["us_per_event"] / max(
            1e-9, row["inserts"]["us_per_event"]
        )
    return row


def queries(
    graph_edges: dict[str, int], scale: float, k_graph: int, k_rel: int, budget: float
) -> dict[str, Any]:
    """Figure 5: every query, every strategy that fits ``budget`` seconds, insert-only and updates."""
    out: dict[str, Any] = {
        "k_graph": k_graph,
        "k_relational": k_rel,
        "budget_s": budget,
        "relational_scale": scale,
        "rows": [],
        "skipped": [],
        "symhj_max_results": SYMHJ_MAX_RESULTS,
    }
    graphs: dict[int, list[tuple[int, int]]] = {}
    for name, make in GRAPH_QUERIES.items():
        n = graph_edges[name]
        edges = graphs.setdefault(n, epinions_like(n))
        exact: int | None = None
        for strategy in GRAPH_STRATEGIES + REDRAWING.get(name, ()):
            if strategy == "symhj" and not enumerable(exact):
                out["skipped"].append({"query": name, "strategy": strategy, "join_size": exact})
                continue
            raw = make(k_graph, strategy, "copies")
            evs = stream_for(raw, edges)
            row = {
                "query": name,
                "family": "graph",
                "input": f"{n:,} edges x {len(raw['relations'])} copies",
                **_pair(raw, [], evs, budget, strategy in UPDATE_STRATEGIES),
            }
            out["rows"].append(row)
            exact = _exact(row, exact)
            _say(row)
    for name, make_rel in RELATIONAL.items():
        exact = None
        for strategy in RELATIONAL_STRATEGIES + REDRAWING.get(name, ()):
            if strategy == "symhj" and not enumerable(exact):
                out["skipped"].append({"query": name, "strategy": strategy, "join_size": exact})
                continue
            raw, preload, evs = make_rel(scale, k_rel, strategy)
            row = {
                "query": name,
                "family": "relational",
                "input": f"{len(preload):,} preloaded + {len(evs):,} streamed rows",
                **_pair(raw, preload, evs, budget, strategy in UPDATE_STRATEGIES),
            }
            out["rows"].append(row)
            exact = _exact(row, exact)
            _say(row)
    return out


def enumerable(join_size: int | None) -> bool:
    """symhj enumerates every result, and one event can bring millions (its budget is checked only
    between events): it runs where SJoin counted the whole join and found it small."""
    return join_size is not None and join_size <= SYMHJ_MAX_RESULTS


def _exact(row: dict[str, Any], known: int | None) -> int | None:
    r = row["inserts"]
    return r["exact_size"] if r["strategy"] in ("sjoin", "sjoin-opt") and not r["timed_out"] else known


def _say(row: dict[str, Any]) -> None:
    parts = [f"{row['query']} {row['inserts']['strategy']}: inserts {_secs(row['inserts'])}"]
    if "updates" in row:
        parts.append(f"updates {_secs(row['updates'])}")
    print(", ".join(parts), flush=True)


def _secs(r: dict[str, Any]) -> str:
    return (
        f"> {r['seconds']:.1f}s ({r['processed']:,} of {r['events']:,})"
        if r["timed_out"]
        else f"{r['seconds']:.2f}s"
    )


def optimisations(scale: float, k: int, budget: float) -> dict[str, Any]:
    """Figure 9 on QZ: propagation-loop iterations and seconds per optimisation (RSJoin)."""
    raw, preload, evs = qz(scale, k, "rsjoin")
    merged = fk_merge(parse_query(options_of(raw)).relations, {a: tuple(c) for a, c in raw["keys"].items()})
    variants = {
        "none": raw,
        "foreign keys": {**raw, "bags": merged},
        "grouping": {**{x: v for x, v in raw.items() if x != "keys"}, "strategy": "rsjoin-opt"},
        "foreign keys + grouping": {**raw, "strategy": "rsjoin-opt"},
    }
    rows = []
    for name, variant in variants.items():
        r = run(variant, preload, evs, budget)
        rows.append({"optimisation": name, **r})
        print(f"Figure 9 {name}: {r['propagations']:,} propagations, {_secs(r)}", flush=True)
    return {"query": "QZ", "scale": scale, "k": k, "bags": merged, "rows": rows}


def scale_sweep(scales: Sequence[float], k: int, budget: float) -> dict[str, Any]:
    """Figure 10: QZ's time against its input size."""
    rows = []
    for s in scales:
        row: dict[str, Any] = {"scale": s}
        for strategy in ("rsjoin", "rsjoin-opt"):
            raw, preload, evs = qz(s, k, strategy)
            row["rows"] = len(preload) + len(evs)
            row[strategy] = run(raw, preload, evs, budget)
        print(f"Figure 10 QZ scale {s}: rsjoin {_secs(row['rsjoin'])}", flush=True)
        rows.append(row)
    return {"query": "QZ", "k": k, "rows": rows}


def graphs(edges_n: int, k: int, budget: float, full_size: bool) -> dict[str, Any]:
    """line-3 on the Epinions-like graph beside Chung-Lu, shuffled alias copies beside fan-out."""
    out: dict[str, Any] = {"edges": edges_n, "k": k, "budget_s": budget, "shapes": {}, "rows": []}
    made = {
        "epinions-like": lambda n: epinions_like(n),
        "chung-lu": lambda n: chung_lu(max(10, round(n * EPINIONS_NODES / EPINIONS_EDGES)), n, seed=1),
    }
    if full_size:
        for name, make in made.items():
            out["shapes"][name] = degree_stats(make(EPINIONS_EDGES))
    for name, make in made.items():
        edges = make(edges_n)
        out["shapes"][f"{name} at {edges_n:,}"] = degree_stats(edges)
        for stream in ("copies", "fanout"):
            for strategy in ("rsjoin", "sjoin"):
                raw = line(3, k, strategy, stream)
                r = run(raw, [], stream_for(raw, edges), budget)
                out["rows"].append({"graph": name, "stream": stream, **r})
                print(f"graphs {name} {stream} {strategy}: {_secs(r)}", flush=True)
    return out


def worker_points(graph_edges: int, scale: float, k: int, update_edges: int) -> dict[str, Any]:
    """A query of each family through the real Worker on the embedded broker (one broker for all)."""
    from bench.reservoir_service import worker_point
    from ivmstream.dev.broker import BrokerProcess

    edges = epinions_like(graph_edges)
    cases: list[tuple[str, dict[str, Any], list[UpdateEvent]]] = []
    for name in ("line-3", "star-4", "dumbbell"):
        n = {"line-3": graph_edges, "star-4": graph_edges // 2}.get(name, max(50, graph_edges // 10))
        raw = GRAPH_QUERIES[name](k, "rsjoin", "copies")
        cases.append((f"{name}, rsjoin", raw, stream_for(raw, edges[:n])))
    for name in ("QZ", "Q10"):
        raw, preload, evs = RELATIONAL[name](scale, k, "rsjoin-opt")
        cases.append((f"{name}, rsjoin-opt", raw, preload + evs))
    raw = line(3, k, "rsjoin")
    cases.append(("line-3 updates, rsjoin", raw, update_stream(stream_for(raw, epinions_like(update_edges)))))
    rows = []
    with BrokerProcess() as broker:
        for name, raw, evs in cases:
            r = worker_point(broker, name, raw, evs)
            rows.append(r)
            print(f"worker {name}: {r['worker_seconds']:.2f}s, engine {r['engine_seconds']:.2f}s", flush=True)
    return {"rows": rows}
