"""The reservoir service through the real runtime, beyond the conformance suite's demo: a stream with
deletes (coalesced rebuilds) and the with-replacement mode over the exact index, killed with SIGKILL
mid-stream and restarted from its Redis checkpoints, publishes exactly the reservoir of an
uninterrupted replay (the conformance suite kills the demo's RocksDB-backed worker the same way).
The results compared hold the sample, |J|, and the sampler's threshold w and counters, so equal
results mean the same reservoir, drawn with the same random numbers."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from ivmstream.service import DemoWorkload
from ivmstream.services.reservoir.service import LINE3_CONFIG, SERVICE
from ivmstream.testing import Case, check_kill9_restart, check_stream_equals_replay

DEMO = Path(__file__).resolve().parents[2] / "services" / "reservoir" / "data" / "graph.jsonl"


def churn_input(path: Path) -> Path:
    """The demo graph with a tenth of its edges deleted again later (some re-inserted after)."""
    lines = [orjson.loads(x) for x in DEMO.read_bytes().splitlines()]
    rng = random.Random(9)
    out: list[dict[str, Any]] = []
    for i, ev in enumerate(lines):
        out.append(ev)
        if i > 40 and rng.random() < 0.1:
            victim = dict(rng.choice(lines[: i - 20]))
            out.append({**victim, "delta": -1})
            if rng.random() < 0.3:
                out.append({**victim, "delta": 1})
    seen: dict[str, set[tuple[Any, ...]]] = {}
    clean = []
    for ev in out:  # keep only deletes of present edges, so nothing is dead-lettered
        key = ev["row"]["graph"]
        edge = (ev["row"]["src"], ev["row"]["dst"])
        present = seen.setdefault(key, set())
        if ev["delta"] == 1:
            present.add(edge)
        elif edge in present:
            present.discard(edge)
        else:
            continue
        clean.append(ev)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in clean))
    return path


def churn_case(tmp_path: Path, **config: Any) -> Case:
    workload = DemoWorkload(
        input=churn_input(tmp_path / "churn.jsonl"),
        config={**LINE3_CONFIG, **config},
        partitions=2,
        name="churn",
    )
    return Case("reservoir", SERVICE, workload)


def test_deletes_through_the_runtime_equal_the_replay(broker, redis_server, unique, tmp_path):
    case = churn_case(tmp_path, strategy="rsjoin-opt", k=10)
    assert any(ev.delta == -1 for evs in case.events_by_key().values() for ev in evs)
    check_stream_equals_replay(case, broker, redis_server.url, tmp_path, unique)


@pytest.mark.slow
def test_kill9_restart_with_replacement_and_the_exact_index(broker, redis_server, unique, tmp_path):
    case = churn_case(tmp_path, strategy="sjoin", with_replacement=True, k=6)
    kills = check_kill9_restart(case, broker, redis_server.url, tmp_path, unique, backend="redis")
    assert len(kills) == 2
