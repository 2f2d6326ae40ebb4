"""Benchmark of the reservoir service: RSJoin against SJoin and the plain reservoir (docs/reservoir/
algorithm.md §7), at Python scale, with machine-independent counters beside every time.

* **E1** time vs N: line-3 and line-4 over a Chung-Lu graph with Epinions-like degrees (one edge
  relation read by every alias), RSJoin on every prefix size, SJoin on the prefixes it finishes within
  the budget; counters: ``place`` calls, propagation-loop iterations, retrieves, stops.
* **E2** per-update latency on line-4 with sampling off (the index alone), RSJoin vs SJoin, over the
  largest prefix SJoin finished in E1's budget.
* **E3** k sweep on a line-3 prefix.
* **E4** RSWP vs RS: θ evaluations (and time) of the predicate reservoir against evaluating θ on every
  item, over densities 0..1 (an edit-distance predicate on short strings).
* **E6** memory: tracemalloc peak of RSJoin and SJoin vs prefix.
* **service**: one line-3 point through the real ``Worker`` on the embedded broker at its batch size,
  against the engine alone on the same batches (the published sample must be the engine's).

Writes ``bench/results/reservoir.json`` and ``reservoir.png``. Run: ``.venv/bin/python bench/reservoir.py``
(``--quick``: a smoke run writing ``reservoir_quick.*``). ``--markdown FILE.json`` prints the tables of
docs/reservoir/benchmark.md from a stored report.
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.lib.machine import machine_info  # noqa: E402
from bench.reservoir_data import chung_lu  # noqa: E402
from bench.reservoir_report import markdown, plot, summarize  # noqa: E402
from ivmstream.events import UpdateEvent  # noqa: E402
from ivmstream.options import parse_options  # noqa: E402
from ivmstream.services.reservoir.engine import ReservoirEngine  # noqa: E402
from ivmstream.services.reservoir.index import JoinIndex  # noqa: E402
from ivmstream.services.reservoir.options import OPTIONS  # noqa: E402
from ivmstream.services.reservoir.query import parse_query  # noqa: E402
from ivmstream.services.reservoir.sampler import Reservoir, rs_without_pushdown  # noqa: E402

RESULTS = REPO / "bench" / "results"
GAMMA = 1.9
AVG_DEGREE = 6.7  # Epinions: 508,837 edges over 75,879 nodes
COUNTERS = ("places", "propagations", "retrieves", "stops_real", "stops_dummy", "theta_evals")


def line_raw(length: int, k: int, strategy: str) -> dict[str, Any]:
    """line-k over one edge relation E(src, dst), read by the aliases G1..Gk."""
    names = "abcdefgh"
    rels = {f"G{i + 1}": [names[i], names[i + 1]] for i in range(length)}
    return {
        "relations": rels,
        "aliases": dict.fromkeys(rels, "E"),
        "base_columns": {"E": ["src", "dst"]},
        "k": k,
        "strategy": strategy,
    }


def line_config(length: int, k: int, strategy: str) -> dict[str, Any]:
    return parse_options(OPTIONS, line_raw(length, k, strategy), owner="bench")


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
    return chung_lu(max(10, int(edges / AVG_DEGREE)), edges, gamma=GAMMA, seed=seed)


def events_of(edges: Sequence[tuple[int, int]]) -> list[UpdateEvent]:
    return [UpdateEvent("E", {"src": s, "dst": d}, 1) for s, d in edges]


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
            evs = events_of(prefix)
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
    """Per-base-edge index update time (every alias), sampling off, rounded vs exact counts; a run past
    ``budget`` seconds stops there (and says so: its mean then covers the cheaper early edges only)."""
    edges = graph(edges_n)
    q = parse_query(line_config(length, 1, "rsjoin"))
    out: dict[str, Any] = {"edges": edges_n, "query": f"line-{length}"}
    for name, exact in (("rsjoin", False), ("sjoin", True)):
        index = JoinIndex([n.attrs for n in q.nodes], q.neighbours(), q.columns, exact=exact)
        lat: list[float] = []
        gc.collect()
        for s, d in edges:
            t0 = time.perf_counter_ns()
            for e in range(length):
                index.insert(e, (s, d))
            lat.append((time.perf_counter_ns() - t0) / 1000)
            if sum(lat) > budget * 1e6:
                break
        processed = len(lat)
        lat.sort()
        out[name] = {
            "processed": processed,
            "timed_out": processed < len(edges),
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
    evs = events_of(graph(edges_n))
    rows = [{"k": k, **timed_run(line_config(3, k, "rsjoin"), evs, budget=float("inf"))} for k in ks]
    return {"edges": edges_n, "rows": rows}


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def e4(items_n: int, k: int, densities: Sequence[float], batch: int = 1000) -> dict[str, Any]:
    """RSWP (θ during the fill and at stops) vs RS (θ on every item), θ: edit distance <= 3."""
    rng = random.Random(4)
    target = "".join(rng.choice("acgt") for _ in range(12))
    rows = []
    for phi in densities:
        items = []
        for _ in range(items_n):
            if rng.random() < phi:
                s = list(target)
                s[rng.randrange(12)] = rng.choice("acgt")
                items.append((("".join(s)),))
            else:
                items.append(("".join(rng.choice("xyz") for _ in range(12)),))

        def theta(row: tuple[str, ...]) -> bool:
            return _edit_distance(row[0], target) <= 3

        res = Reservoir(k, random.Random(1), theta)
        t0 = time.perf_counter()
        for i in range(0, items_n, batch):
            part = items[i : i + batch]
            res.update(len(part), part.__getitem__)
        rswp_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        _, rs_evals = rs_without_pushdown(k, random.Random(1), items, lambda x: theta(x))
        rs_s = time.perf_counter() - t0
        expected = (
            items_n if phi == 0 else min(items_n, (k / phi) * (1 + math.log(max(phi * items_n / k, 1))))
        )
        rows.append(
            {
                "density": phi,
                "rswp_evals": res.counters.theta_evals,
                "rs_evals": rs_evals,
                "ratio": rs_evals / max(1, res.counters.theta_evals),
                "expected_rswp_evals": expected,
                "rswp_seconds": rswp_s,
                "rs_seconds": rs_s,
            }
        )
        print(f"E4 density {phi}: RS {rs_evals} / RSWP {res.counters.theta_evals} evaluations", flush=True)
    return {"items": items_n, "k": k, "rows": rows}


def e6(sizes: Sequence[int], k: int) -> dict[str, Any]:
    edges = graph(max(sizes))
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"edges": n}
        for strategy in ("rsjoin", "sjoin"):
            gc.collect()
            tracemalloc.start()
            engine = ReservoirEngine(line_config(3, k, strategy))
            engine.apply(events_of(edges[:n]))
            _, peak = tracemalloc.get_traced_memory()
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            row[strategy] = {"peak_bytes": peak, "held_bytes": current, "bytes_per_edge": current / n}
            del engine
        rows.append(row)
    return {"k": k, "rows": rows}


def service_point(edges_n: int, k: int) -> dict[str, Any]:
    """Line-3 through the real Worker (batch size and checkpoints at their defaults) vs the engine."""
    from bench.fivm_service import _worker_run
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    evs = events_of(graph(edges_n))
    service = load_service("reservoir")
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-reservoir-bench-"))
    query = line_raw(3, k, "rsjoin")
    try:
        with BrokerProcess() as broker:
            topic = f"reservoir-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            config = build_config(
                service,
                {**query, "input_topic": topic, "output_topic": f"{topic}.out", "dlq_topic": f"{topic}.dlq"},
            )
            end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in evs])
            run = _worker_run(
                service,
                config,
                broker.bootstrap,
                open_store("rocksdb", f"res.{topic}", state_dir=tmp),
                f"{topic}-g",
                end,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    engine = ReservoirEngine(config.options)
    batch = config.batch_size
    t0 = time.perf_counter()
    for i in range(0, len(evs), batch):
        engine.apply(evs[i : i + batch])
    engine_s = time.perf_counter() - t0
    published = run.pop("result")
    if published["sample"] != engine.result()["sample"]:
        raise AssertionError("the worker's sample differs from the engine's on the same events")
    return {
        "query": "line-3, rsjoin",
        "events": len(evs),
        "k": k,
        "batch_size": batch,
        "checkpoint_interval_s": config.checkpoint_interval,
        "worker_seconds": run["seconds"],
        "worker_events_per_second": len(evs) / run["seconds"],
        "engine_seconds": engine_s,
        "engine_events_per_second": len(evs) / engine_s,
        "worker_share_of_engine": engine_s / run["seconds"],
        "checkpoints": run["checkpoints"],
        "same_sample_as_engine": True,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=40.0, help="seconds of apply() per SJoin prefix")
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--e1-line3", default="2000,5000,10000,20000,50000,100000,200000")
    p.add_argument("--e1-line4", default="1000,2000,5000,10000,20000,50000,100000")
    p.add_argument(
        "--e2-edges", type=int, default=2000, help="without E1: else its largest line-4 SJoin prefix"
    )
    p.add_argument("--e3-edges", type=int, default=20000)
    p.add_argument("--e3-ks", default="10,100,1000,10000,100000,300000")
    p.add_argument("--e4-items", type=int, default=100000)
    p.add_argument("--e6-sizes", default="2000,4000,8000")
    p.add_argument("--service-edges", type=int, default=20000, help="0: skip the worker run")
    p.add_argument("--experiments", default="e1,e2,e3,e4,e6,service")
    p.add_argument("--out", default=str(RESULTS / "reservoir.json"))
    p.add_argument("--markdown", metavar="FILE.json", help="print the docs tables of a stored report")
    p.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, a short budget")
    a = p.parse_args(argv)
    if a.markdown:
        print(markdown(orjson.loads(Path(a.markdown).read_bytes())))
        return 0
    if a.quick:
        a.budget, a.k = 2.0, 20
        a.e1_line3, a.e1_line4, a.e2_edges, a.e3_edges, a.e3_ks = "300,600", "300", 300, 300, "1,10,100"
        a.e4_items, a.e6_sizes, a.service_edges = 2000, "300", 300
        if a.out == str(RESULTS / "reservoir.json"):
            a.out = str(RESULTS / "reservoir_quick.json")
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    todo = set(a.experiments.split(","))
    report: dict[str, Any] = {
        "options": {k: v for k, v in vars(a).items() if k != "out"},  # where it was written: the machine's
        "graph": {"gamma": GAMMA, "avg_degree": AVG_DEGREE},
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
        report["e4"] = e4(a.e4_items, 1000 if not a.quick else 20, [i / 10 for i in range(11)])
    if "e6" in todo:
        report["e6"] = e6(ints(a.e6_sizes), a.k)
    if "service" in todo and a.service_edges:
        report["service"] = service_point(a.service_edges, a.k)
    report["seconds"] = time.perf_counter() - started
    report["summary"] = summarize(report)
    report["machine"] = machine_info()
    out = Path(a.out).with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    plot(report, out.with_suffix(".png"))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
