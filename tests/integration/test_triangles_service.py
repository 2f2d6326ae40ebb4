"""The triangles service through the real runtime: results, crashes, scale-out, vs independent oracles."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import networkx as nx
import orjson
from helpers import offline_results, published_results, start_worker, stop_worker, trickle, write_config

from shared.runtime.progress import wait_caught_up

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "triangles" / "sample.jsonl"


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


def config(tmp_path, unique, **extra):
    return write_config(
        tmp_path / "tri.json",
        mode="graph",
        strategy="ivm-eps",
        epsilon="1/2",
        key_field="graph",
        input_topic=f"{unique}.updates",
        output_topic=f"{unique}.results",
        dlq_topic=f"{unique}.dlq",
        **extra,
    )


def test_stream_equals_replay_and_networkx(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 0.0)
    worker = start_worker(
        "triangles",
        "--bootstrap",
        broker.bootstrap,
        "--config",
        str(cfg),
        "--group",
        f"{unique}-g",
        "--state-dir",
        str(tmp_path / "s"),
        "--redis",
        redis_server.url,
        log=tmp_path / "w.log",
    )
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-g", f"{unique}.updates")
    finally:
        assert stop_worker(worker) == 0, (tmp_path / "w.log").read_text()
    published = published_results(redis_server.url, f"{unique}.results", service="triangles")
    assert answer(published) == answer(offline_results(cfg, SAMPLE, service="triangles"))
    truth = networkx_triangles()
    assert {k: r["triangles"] for k, r in published.items()} == truth
    assert all(r["count"] == 6 * r["triangles"] for r in published.values())
    assert min(truth.values()) > 0


def test_kill9_mid_stream_then_restart_equals_uninterrupted(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    cfg = config(tmp_path, unique, batch_size=100, checkpoint_interval=0.3, session_timeout_ms=6000)
    args = [
        "triangles",
        "--bootstrap",
        broker.bootstrap,
        "--config",
        str(cfg),
        "--group",
        f"{unique}-g",
        "--state-dir",
        str(tmp_path / "s"),
        "--redis",
        redis_server.url,
    ]
    feeder = threading.Thread(
        target=trickle, args=(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 3.0)
    )
    feeder.start()
    try:
        for _ in range(2):
            worker = start_worker(*args, log=tmp_path / "w.log")
            time.sleep(1.3)
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
        feeder.join()
        worker = start_worker(*args, log=tmp_path / "w.log")
        wait_caught_up(broker.bootstrap, f"{unique}-g", f"{unique}.updates", timeout=120)
        assert stop_worker(worker) == 0, (tmp_path / "w.log").read_text()
    finally:
        feeder.join()
    published = published_results(redis_server.url, f"{unique}.results", service="triangles")
    expected = offline_results(cfg, SAMPLE, service="triangles")
    assert answer(published) == answer(expected)
    # The restored engines continued exactly: even their cumulative work counters match the replay.
    for key, result in published.items():
        for counter in ("tuple_updates", "work_total", "size"):
            assert result["stats"][counter] == expected[key]["stats"][counter]


def test_two_workers_union_equals_single(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 2)
    pair = config(tmp_path, unique, checkpoint_interval=0.3)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 0.0)
    workers = [
        start_worker(
            "triangles",
            "--bootstrap",
            broker.bootstrap,
            "--config",
            str(pair),
            "--group",
            f"{unique}-p",
            "--state-dir",
            str(tmp_path / "s"),
            "--redis",
            redis_server.url,
            log=tmp_path / f"w{i}.log",
        )
        for i in range(2)
    ]
    try:
        wait_caught_up(broker.bootstrap, f"{unique}-p", f"{unique}.updates")
    finally:
        codes = [stop_worker(w) for w in workers]
    assert codes == [0, 0]
    union = published_results(redis_server.url, f"{unique}.results", service="triangles")
    assert answer(union) == answer(offline_results(pair, SAMPLE, service="triangles"))
    assert set(union) == {"social", "mesh"}
