"""The triangles service through the real runtime against independent oracles (networkx) and split over two
workers; the generic checks (replay, kill -9, snapshots) are the conformance suite's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import orjson
from helpers import (
    catch_up_with_workers,
    offline_results,
    published_results,
    stream_config,
    trickle,
    worker_args,
)

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "triangles" / "data" / "sample.jsonl"


def answer(results: dict) -> dict:
    """The answer without the engine's diagnostics (work counters differ with batch boundaries)."""
    return {k: {f: v for f, v in r.items() if f != "stats"} for k, r in results.items()}


def networkx_triangles() -> dict[str, int]:
    graphs: dict[str, nx.Graph] = {}
    for line in SAMPLE.read_bytes().splitlines():
        ev = orjson.loads(line)
        g = graphs.setdefault(ev["row"]["graph"], nx.Graph())
        u, v = ev["row"]["src"], ev["row"]["dst"]
        if ev["delta"] > 0:
            g.add_edge(u, v)
        else:
            g.remove_edge(u, v)
    return {k: sum(nx.triangles(g).values()) // 3 for k, g in graphs.items()}


def config(tmp_path: Path, unique: str, **extra: Any) -> Path:
    """The graph-mode IVM^eps(1/2) config, keyed by graph, on the test's own topics."""
    return stream_config(
        tmp_path / "tri.json",
        unique,
        mode="graph",
        strategy="ivm-eps",
        epsilon="1/2",
        key_field="graph",
        **extra,
    )


def test_stream_equals_replay_and_networkx(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 0.0)
    args = worker_args("triangles", broker, redis_server, unique, tmp_path, cfg)
    catch_up_with_workers(args, broker, unique, tmp_path)
    published = published_results(redis_server.url, f"{unique}.results", service="triangles")
    assert answer(published) == answer(offline_results(cfg, SAMPLE, service="triangles"))
    truth = networkx_triangles()
    assert {k: r["triangles"] for k, r in published.items()} == truth
    assert all(r["count"] == 6 * r["triangles"] for r in published.values())
    assert min(truth.values()) > 0


def test_two_workers_union_equals_single(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    pair = config(tmp_path, unique, checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 0.0)
    args = worker_args("triangles", broker, redis_server, unique, tmp_path, pair, "p")
    catch_up_with_workers(args, broker, unique, tmp_path, workers=2, group="p")
    union = published_results(redis_server.url, f"{unique}.results", service="triangles")
    assert answer(union) == answer(offline_results(pair, SAMPLE, service="triangles"))
    assert set(union) == {"social", "mesh"}
