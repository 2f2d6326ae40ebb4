"""Benchmark of the reservoir service: RSJoin against SJoin, its other baselines and the plain reservoir
(docs/reservoir/algorithm.md §7), the paper's §6 experiments at Python scale, with machine-independent
counters beside every time.

* **E1** time vs N (the paper's Figure 7): line-3 and line-4 over prefixes of an Epinions-like graph
  fed as the paper's shuffled alias copies (``--graph``, ``--stream`` choose Chung-Lu and the service's
  fan-out instead), RSJoin on every prefix, SJoin on the prefixes it finishes within the budget;
  counters: ``place`` calls, propagation-loop iterations, retrieves, stops.
* **E2** per-tuple update time on line-4 with sampling off (the index alone, Figure 6), RSJoin vs
  SJoin, over the largest prefix SJoin finished in E1's budget.
* **E3** k sweep on a line-3 prefix, k up to 10^6 (Figure 8).
* **E4** RSWP vs RS (Figures 12 and 13): θ evaluations and time of the predicate reservoir against
  evaluating θ on every item, over densities 0..1 and along the stream at density 0.1; θ is the
  paper's: edit distance <= 16 from a 1,024-character query string (rapidfuzz's bounded Levenshtein).
* **E6** memory (Figure 11): tracemalloc of RSJoin and SJoin on line-3, RSJoin-opt and SJoin-opt on Q10.
* **updates** (not in the default set; its own run writes ``reservoir_updates.json``): an update stream
  against an insert stream on line-3, engine and worker, bench/reservoir_updates.py.
* **queries**, **optimisations**, **scale**, **graphs**, **workers**: bench/reservoir_paper.py (Figures
  5, 9 and 10, the graphs' shapes, a query of each family through the real Worker).

Writes ``bench/results/reservoir.json`` and ``reservoir.png``. Run: ``.venv/bin/python bench/reservoir.py``
(``--quick``: a smoke run writing ``reservoir_quick.*``). ``--markdown FILE.json`` prints the tables of
docs/reservoir/benchmark.md from a stored report.
"""

from __future__ import annotations

import argparse
import ast
import functools
import gc
import math
import random
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
from rapidfuzz.distance import Levenshtein  # noqa: E402

from bench import reservoir_paper as paper  # noqa: E402
from bench import reservoir_updates as updates  # noqa: E402
from bench.lib.machine import load_average, machine_info  # noqa: E402
from bench.lib.report import command_line  # noqa: E402
from bench.reservoir_data import chung_lu  # noqa: E402
from bench.reservoir_graphs import EPINIONS_EDGES, EPINIONS_NODES, epinions_like, line, stream_for  # noqa: E402
from bench.reservoir_relational import q10  # noqa: E402
from bench.reservoir_report import markdown, plot, summarize  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.options import parse_options  # noqa: E402
from ivmstream.services.reservoir.engine import ReservoirEngine  # noqa: E402
from ivmstream.services.reservoir.index import JoinIndex  # noqa: E402
from ivmstream.services.reservoir.options import OPTIONS  # noqa: E402
from ivmstream.services.reservoir.query import parse_query  # noqa: E402
from ivmstream.services.reservoir.sampler import Reservoir, rs_without_pushdown  # noqa: E402

RESULTS = REPO / "bench" / "results"
COUNTERS = ("places", "propagations", "retrieves", "stops_real", "stops_dummy", "theta_evals")
GRAPH = {"name": "epinions-like", "stream": "copies"}  # set by main from --graph and --stream


def line_config(length: int, k: int, strategy: str) -> dict[str, Any]:
    return parse_options(OPTIONS, line(length, k, strategy, GRAPH["stream"]), owner="bench")


def walks(edges: Sequence[tuple[int, int]], length: int) -> int:
    """|line-k| = the number of directed walks with ``length`` edges (dynamic programming)."""
    ending: Counter[int] = Counter()
    for _, d in edges:
        ending[d] += 1
    for _ in range(length - 1):
        nxt: Counter[int] = Counter()
        for s, d in edges:
            if ending[s]:
                nxt[d] += ending[s]
        ending = nxt
    return sum(ending.values())


def graph(edges: int, seed: int = 1) -> list[tuple[int, int]]:
    """The benchmark's graph with ``edges`` edges at Epinions' 6.7 edges per node."""
    if GRAPH["name"] == "chung-lu":
        return chung_lu(max(10, round(edges * EPINIONS_NODES / EPINIONS_EDGES)), edges, seed=seed)
    return epinions_like(edges, seed=seed)


def events_of(length: int, edges: Sequence[tuple[int, int]]) -> list[UpdateEvent]:
    return stream_for(line(length, 1, "rsjoin", GRAPH["stream"]), edges)


def timed_run(
    options: dict[str, Any], events: Sequence[UpdateEvent], budget: float, chunk: int = 500
) -> dict[str, Any]:
    """Apply ``events`` in chunks until done or past ``budget`` seconds; time, counters, sample size."""
    engine = ReservoirEngine(options)
    gc.collect()
    spent, done = 0.0, 0
    while done < len(events):
        part = events[done : done + chunk]
        t0 = time.perf_counter()
        engine.apply(part)
        spent += time.perf_counter() - t0
        done += len(part)
        if spent > budget and done < len(events):
            break
    stats = engine.stats()
    return {
        "strategy": options["strategy"],
        "events": len(events),
        "processed": done,
        "timed_out": done < len(events),
        "seconds": spent,
        "us_per_event": 1e6 * spent / done,
        "sample_size": len(engine.rows()),
        "join_size_bound": engine.join_size_bound(),
        **{c: int(stats[c]) for c in COUNTERS},
    }


def e1(sizes: Sequence[int], lengths: Sequence[int], k: int, budget: float) -> dict[str, Any]:
    edges = graph(max(sizes))
    out: dict[str, Any] = {"sizes": list(sizes), "k": k, "budget_s": budget, "queries": {}}
    for length in lengths:
        rows = []
        sjoin_alive = True
        for n in sizes:
            prefix = edges[:n]
            evs = events_of(length, prefix)
            row: dict[str, Any] = {"edges": n, "join_size": walks(prefix, length)}
            row["rsjoin"] = timed_run(line_config(length, k, "rsjoin"), evs, budget=float("inf"))
            if sjoin_alive:
                row["sjoin"] = timed_run(line_config(length, k, "sjoin"), evs, budget=budget)
                sjoin_alive = not row["sjoin"]["timed_out"]
            print(
                f"E1 line-{length} N={n}: "
                + ", ".join(f"{s} {row[s]['seconds']:.2f}s" for s in ("rsjoin", "sjoin") if s in row),
                flush=True,
            )
            rows.append(row)
        out["queries"][f"line-{length}"] = rows
    return out


def e2(edges_n: int, length: int, budget: float) -> dict[str, Any]:
    """Per-tuple index update time (one alias relation's tuple; with fan-out, one base edge into every
    alias), sampling off, rounded vs exact counts; a run past ``budget`` seconds stops there (and says
    so: its mean then covers the cheaper early tuples only)."""
    edges = graph(edges_n)
    q = parse_query(line_config(length, 1, "rsjoin"))
    alias_node = {a: i for i, n in enumerate(q.nodes) for a in n.members}
    tuples: list[tuple[list[int], tuple[Any, ...]]] = []
    for ev in events_of(length, edges):
        nodes = [alias_node[a] for a in q.fanout[ev.relation]]
        tuples.append((nodes, tuple(ev.row.values())))
    out: dict[str, Any] = {"edges": edges_n, "query": f"line-{length}", "unit": GRAPH["stream"]}
    for name, exact in (("rsjoin", False), ("sjoin", True)):
        index = JoinIndex([n.attrs for n in q.nodes], q.neighbours(), q.columns, exact=exact)
        lat: list[float] = []
        gc.collect()
        for nodes, t in tuples:
            t0 = time.perf_counter_ns()
            for e in nodes:
                index.insert(e, t)
            lat.append((time.perf_counter_ns() - t0) / 1000)
            if sum(lat) > budget * 1e6:
                break
        processed = len(lat)
        lat.sort()
        out[name] = {
            "processed": processed,
            "timed_out": processed < len(tuples),
            "mean_us": statistics.fmean(lat),
            "p50_us": lat[len(lat) // 2],
            "p90_us": lat[int(len(lat) * 0.9)],
            "p99_us": lat[int(len(lat) * 0.99)],
            "max_us": lat[-1],
            "min_us": lat[0],
            "histogram": _log_histogram(lat),
            "places": index.places,
            "propagations": index.propagations,
        }
    out["mean_ratio_sjoin_over_rsjoin"] = out["sjoin"]["mean_us"] / out["rsjoin"]["mean_us"]
    return out


def _log_histogram(values: Sequence[float]) -> dict[str, int]:
    bins: Counter[int] = Counter(math.floor(math.log10(max(v, 0.1)) * 4) for v in values)
    return {f"{10 ** (b / 4):.3g}": c for b, c in sorted(bins.items())}


def e3(edges_n: int, ks: Sequence[int]) -> dict[str, Any]:
    evs = events_of(3, graph(edges_n))
    rows = [{"k": k, **timed_run(line_config(3, k, "rsjoin"), evs, budget=float("inf"))} for k in ks]
    return {"edges": edges_n, "rows": rows}


def _strings(rng: random.Random, target: str, n: int, density: float, threshold: int) -> list[tuple[str]]:
    """``n`` strings at 0..4·threshold substitutions from ``target`` (distinct positions, a different
    letter each), a ``density`` share of them within ``threshold``: the paper's stream (distances 0-64
    for a threshold of 16)."""
    out = []
    letters = "acgt"
    for _ in range(n):
        d = rng.randint(0, threshold) if rng.random() < density else rng.randint(threshold + 1, 4 * threshold)
        s = list(target)
        for i in rng.sample(range(len(target)), d):
            s[i] = letters[(letters.index(s[i]) + rng.randint(1, 3)) % 4]
        out.append(("".join(s),))
    return out


def e4(
    items_n: int, k: int, densities: Sequence[float], length: int, threshold: int, batch: int = 1000
) -> dict[str, Any]:
    """RSWP (θ during the fill and at stops) vs RS (θ on every item); θ: edit distance <= threshold."""
    rng = random.Random(4)
    target = "".join(rng.choice("acgt") for _ in range(length))

    def theta(row: tuple[str, ...]) -> bool:
        return Levenshtein.distance(row[0], target, score_cutoff=threshold) <= threshold

    rows = []
    progress: list[dict[str, Any]] = []
    for phi in densities:
        items = _strings(rng, target, items_n, phi, threshold)
        res = Reservoir(k, random.Random(1), theta)
        t0 = time.perf_counter()
        marks = {items_n * j // 10 for j in range(1, 11)}
        for i in range(0, items_n, batch):
            part = items[i : i + batch]
            res.update(len(part), part.__getitem__)
            if phi == 0.1 and i + len(part) in marks:
                progress.append(
                    {
                        "items": i + len(part),
                        "rswp_evals": res.counters.theta_evals,
                        "rswp_seconds": time.perf_counter() - t0,
                    }
                )
        rswp_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, rs_evals = rs_without_pushdown(k, random.Random(1), items, theta)
        rs_s = time.perf_counter() - t0
        if phi == 0.1:
            for p in progress:
                t1 = time.perf_counter()
                rs_without_pushdown(k, random.Random(1), items[: p["items"]], theta)
                p.update(rs_evals=p["items"], rs_seconds=time.perf_counter() - t1)
        real = sum(1 for x in items if theta(x))
        expected = (
            items_n if real == 0 else min(items_n, (k * items_n / real) * (1 + math.log(max(real / k, 1))))
        )
        rows.append(
            {
                "density": phi,
                "real_density": real / items_n,
                "rswp_evals": res.counters.theta_evals,
                "rs_evals": rs_evals,
                "ratio": rs_evals / max(1, res.counters.theta_evals),
                "expected_rswp_evals": expected,
                "rswp_seconds": rswp_s,
                "rs_seconds": rs_s,
            }
        )
        print(f"E4 density {phi}: RS {rs_evals} / RSWP {res.counters.theta_evals} evaluations", flush=True)
        del items
    return {
        "items": items_n,
        "k": k,
        "length": length,
        "threshold": threshold,
        "rows": rows,
        "progress_at_density_0.1": progress,
    }


@functools.cache
def _functions(path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every function in a source file (parsed once per run)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _by_function(snapshot: tracemalloc.Snapshot, top: int = 6) -> dict[str, int]:
    """Bytes held by the function that allocated them (``file:function``), the largest ``top``."""
    funcs: dict[str, list[tuple[int, int, str]]] = {}
    held: Counter[str] = Counter()
    for stat in snapshot.statistics("lineno"):
        frame = stat.traceback[0]
        spans = funcs.setdefault(frame.filename, _functions(frame.filename))
        inner = [f for f in spans if f[0] <= frame.lineno <= f[1]]
        name = min(inner, key=lambda f: f[1] - f[0])[2] if inner else "<module>"
        held[f"{Path(frame.filename).name}:{name}"] += stat.size
    return dict(held.most_common(top))


def _held(
    raw: dict[str, Any], preload: Sequence[UpdateEvent], events: Sequence[UpdateEvent], sites: bool = False
) -> dict[str, Any]:
    """tracemalloc's bytes held by an engine after the events (never checkpointed: no change log), and
    with ``sites`` the functions that allocated them."""
    gc.collect()
    tracemalloc.start()
    engine = ReservoirEngine(parse_options(OPTIONS, raw, owner="bench"))
    engine.apply(list(preload))
    engine.apply(list(events))
    current, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot() if sites else None
    tracemalloc.stop()  # before the sites are named: parsing sources under tracing is slow
    by_site = _by_function(snapshot) if snapshot is not None else None
    del engine
    n = len(preload) + len(events)
    out = {"peak_bytes": peak, "held_bytes": current, "bytes_per_edge": current / n, "tuples": n}
    if by_site is not None:
        out["by_function"] = by_site
    return out


def e6(sizes: Sequence[int], k: int, q10_scales: Sequence[float]) -> dict[str, Any]:
    """Held memory against the input: line-3 (RSJoin, SJoin) and Q10 (RSJoin-opt, SJoin-opt)."""
    edges = graph(max(sizes))
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"edges": n}
        for strategy in ("rsjoin", "sjoin"):
            raw = line(3, k, strategy, GRAPH["stream"])
            row[strategy] = _held(raw, [], stream_for(raw, edges[:n]), sites=n == max(sizes))
        rows.append(row)
    q10_rows = []
    for scale in q10_scales:
        row = {"scale": scale}
        for strategy in ("rsjoin-opt", "sjoin-opt"):
            raw, preload, evs = q10(scale, k, strategy)
            row[strategy] = _held(raw, preload, evs)
        q10_rows.append(row)
    return {"k": k, "rows": rows, "q10_rows": q10_rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=20.0, help="seconds of apply() per SJoin prefix (E1, E2)")
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--graph", choices=("epinions-like", "chung-lu"), default="epinions-like")
    p.add_argument("--stream", choices=("copies", "fanout"), default="copies")
    p.add_argument("--e1-line3", default="2000,5000,10000,20000,50000")
    p.add_argument("--e1-line4", default="1000,2000,5000,10000,20000")
    p.add_argument(
        "--e2-edges", type=int, default=2000, help="without E1: else its largest line-4 SJoin prefix"
    )
    p.add_argument("--e3-edges", type=int, default=10000)
    p.add_argument("--e3-ks", default="10,100,1000,10000,100000,1000000")
    p.add_argument("--e4-items", type=int, default=100000)
    p.add_argument("--e4-length", type=int, default=1024)
    p.add_argument("--e4-threshold", type=int, default=16)
    p.add_argument("--e6-sizes", default="2000,4000,8000")
    p.add_argument("--e6-q10-scales", default="0.5,1,2")
    p.add_argument("--run-budget", type=float, default=8.0, help="seconds per run of the paper's queries")
    p.add_argument(
        "--graph-edges",
        default="line-3=8000,line-4=4000,line-5=2500,star-4=1500,star-5=1500,star-6=1500,dumbbell=1200",
    )
    p.add_argument("--scale", type=float, default=1.0, help="the relational workloads' scale")
    p.add_argument("--scales", default="0.5,1,2,3", help="QZ's scales (Figure 10)")
    p.add_argument("--graphs-edges", type=int, default=8000)
    p.add_argument("--worker-edges", type=int, default=4000, help="0: no worker runs")
    p.add_argument("--worker-update-edges", type=int, default=2000)
    p.add_argument("--experiments", default="e1,e2,e3,e4,e6,queries,optimisations,scale,graphs,workers")
    p.add_argument("--out", default=str(RESULTS / "reservoir.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs tables of a stored report")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, a short budget")
    p.add_argument(
        "--update",
        action="store_true",
        help="run only --experiments and replace them in the stored report at --out (each re-run recorded)",
    )
    a = p.parse_args(argv)
    if a.markdown:
        print(markdown(orjson.loads(Path(a.markdown).read_bytes())))
        return 0
    if a.quick:
        a.budget, a.k, a.run_budget = 2.0, 20, 2.0
        a.e1_line3, a.e1_line4, a.e2_edges, a.e3_edges, a.e3_ks = "200,400", "200", 200, 200, "1,10,100"
        a.e4_items, a.e4_length, a.e6_sizes, a.e6_q10_scales = 1000, 64, "200", "0.05"
        a.graph_edges = "line-3=150,line-4=100,line-5=60,star-4=60,star-5=40,star-6=30,dumbbell=60"
        a.scale, a.scales, a.graphs_edges, a.worker_edges, a.worker_update_edges = (
            0.05,
            "0.05,0.1",
            200,
            150,
            60,
        )
        if a.out == str(RESULTS / "reservoir.json"):
            a.out = str(RESULTS / "reservoir_quick.json")
        # Every run starts with a full collection; on smoke sizes, collecting what the imports left was
        # a large part of the run. A full run leaves the heap as it is.
        gc.freeze()
    GRAPH.update(name=a.graph, stream=a.stream)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    floats = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    todo = set(a.experiments.split(","))
    stored = orjson.loads(Path(a.out).with_suffix(".json").read_bytes()) if a.update else None
    report: dict[str, Any] = {
        "command": command_line("bench/reservoir.py", argv),
        "options": {k: v for k, v in vars(a).items() if k != "out"},  # where it was written: the machine's
        "graph": dict(GRAPH),
        "load_at_start": load_average(),
    }
    started = time.perf_counter()
    if "e1" in todo:
        report["e1"] = e1(ints(a.e1_line3), [3], a.k, a.budget)
        report["e1"]["queries"].update(e1(ints(a.e1_line4), [4], a.k, a.budget)["queries"])
    if "e2" in todo:
        finished = summarize(report).get("line-4_largest_sjoin_prefix", a.e2_edges)
        report["e2"] = e2(finished, 4, a.budget)
        print(f"E2 mean ratio {report['e2']['mean_ratio_sjoin_over_rsjoin']:.1f}x", flush=True)
    if "e3" in todo:
        report["e3"] = e3(a.e3_edges, ints(a.e3_ks))
    if "e4" in todo:
        report["e4"] = e4(
            a.e4_items, 1000 if not a.quick else 20, [i / 10 for i in range(11)], a.e4_length, a.e4_threshold
        )
    if "e6" in todo:
        report["e6"] = e6(ints(a.e6_sizes), a.k, floats(a.e6_q10_scales))
    graph_edges = {name: int(n) for name, n in (x.split("=") for x in a.graph_edges.split(","))}
    if "queries" in todo:
        report["queries"] = paper.queries(graph_edges, a.scale, a.k, a.k, a.run_budget)
    if "optimisations" in todo:
        report["optimisations"] = paper.optimisations(a.scale, a.k, a.run_budget * 3)
    if "scale" in todo:
        report["scale"] = paper.scale_sweep(floats(a.scales), a.k, a.run_budget * 3)
    if "graphs" in todo:
        report["graphs"] = paper.graphs(a.graphs_edges, a.k, a.run_budget, full_size=not a.quick)
    if "workers" in todo and a.worker_edges:
        report["workers"] = paper.worker_points(a.worker_edges, a.scale, a.k, a.worker_update_edges)
    if "updates" in todo:
        sizes = (300, 40, 2) if a.quick else (20_000, 6_000, 5)  # edges, events per stream, repeats
        report["updates"] = updates.experiment(
            *sizes[:2], a.k, sizes[2], a.worker_edges > 0, 10 if a.quick else None
        )
    report["seconds"] = time.perf_counter() - started
    if stored is not None:  # the stored run keeps its own record; this re-run is listed beside it
        rerun = {
            "experiments": sorted(todo & set(report)),
            "command": report["command"],
            "load_at_start": report["load_at_start"],
            "load_at_end": load_average(),
            "seconds": report["seconds"],
        }
        report = {**stored, **{x: report[x] for x in rerun["experiments"]}}
        report["reruns"] = [*stored.get("reruns", []), rerun]
    report["summary"] = summarize(report)
    report["machine"] = report.get("machine") if stored is not None else machine_info()
    out = Path(a.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
