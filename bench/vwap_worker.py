"""The vwap benchmark's worker point: the vwap service through a real ``Worker`` on the embedded broker,
against the engine alone on the same events in the same batches.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.vwap_engines import Event, answer
from ivmstream.events import UpdateEvent
from ivmstream.services.vwap.engine import VwapEngine


def worker_suite(args: argparse.Namespace, traces: dict[str, list[Event]]) -> dict[str, Any]:
    """The vwap service through the real ``Worker`` on the embedded broker against ``VwapEngine``
    alone on the same events in the same batches (the best of two worker runs and of three engine
    runs: a shared machine's noise is of the order of the differences)."""
    from bench.lib.broker import produce_checked
    from ivmstream.config import build_config
    from ivmstream.dev.broker import BrokerProcess
    from ivmstream.events import encode_event
    from ivmstream.service import load_service
    from ivmstream.state import open_store

    n = min(args.worker_events, len(traces["bids"]))
    flat = [UpdateEvent(rel, row, m, None) for rel, row, m in traces["bids"][:n]]
    service = load_service("vwap")
    out: dict[str, Any] = {"events": n, "strategies": {}}
    tmp = Path(tempfile.mkdtemp(prefix="ivmstream-vwap-bench-"))
    try:
        with BrokerProcess() as broker:
            topic = f"vwap-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, 1)
            end = produce_checked(broker.bootstrap, topic, [encode_event(ev) for ev in flat])
            for strategy in args.worker_strategies:
                config = build_config(
                    service,
                    {
                        "query": "vwap",
                        "strategy": strategy,
                        "input_topic": topic,
                        "output_topic": f"{topic}.{strategy}.out",
                        "dlq_topic": f"{topic}.{strategy}.dlq",
                    },
                )
                runs = [
                    _worker_run(
                        service,
                        config,
                        broker.bootstrap,
                        open_store("rocksdb", f"vwap.{topic}.{strategy}.{i}", state_dir=tmp),
                        f"{topic}-{strategy}-g{i}",
                        end,
                    )
                    for i in range(2)
                ]
                batch = config.batch_size
                engine_s = []
                for _ in range(3):
                    engine = VwapEngine("vwap", strategy)
                    t0 = time.perf_counter()
                    for i in range(0, n, batch):
                        assert not engine.apply(flat[i : i + batch])
                        engine.result()
                    engine_s.append(time.perf_counter() - t0)
                want = answer(engine.result())
                best = min(runs, key=lambda r: r["seconds"])
                agree = all(answer(r["result"]) == want for r in runs)
                out["batch"] = batch
                out["strategies"][strategy] = {
                    "worker_seconds": best["seconds"],
                    "worker_events_per_s": n / best["seconds"],
                    "engine_seconds": min(engine_s),
                    "engine_events_per_s": n / min(engine_s),
                    "agree": agree,
                }
                print(
                    f"  worker vwap {strategy:<10} {n} events, batch {batch}: worker {best['seconds']:.2f}s, "
                    f"engine {min(engine_s):.2f}s, results agree: {agree}",
                    flush=True,
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _worker_run(
    service: Any, config: Any, bootstrap: str, store: Any, group: str, end: int
) -> dict[str, Any]:
    """One worker from the start of the topic until caught up (final checkpoint included): seconds
    from its first batch, and its in-memory result at the end."""
    from bench.lib.worker_runs import run_until_caught_up
    from ivmstream.runtime import Worker

    seconds, results = run_until_caught_up(Worker(service, config, bootstrap, store, group=group), {0: end})
    (result,) = results.values()
    return {"seconds": seconds, "result": result}
