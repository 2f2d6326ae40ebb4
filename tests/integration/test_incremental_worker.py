"""Incremental checkpoints through the real worker: kill -9 mid-stream on RocksDB and on Redis state
ends where an uninterrupted run ends, the stored state is entries (not whole snapshots), and state
written under another configuration is refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import (
    catch_up_with_workers,
    ivm,
    kill9_mid_stream_then_catch_up,
    offline_results,
    published_results,
    run_args,
    stream_config,
    triangles_graph_config,
    trickle,
)

from ivmstream.config import load_config, resolve_options
from ivmstream.service import load_service
from ivmstream.state import StateError, check_envelope, envelope_for, open_store

SAMPLE = Path(__file__).resolve().parents[2] / "services" / "triangles" / "data" / "sample.jsonl"


def answer(results: dict) -> dict:
    return {k: {f: v for f, v in r.items() if f != "stats"} for k, r in results.items()}


@pytest.mark.parametrize("backend", ["rocksdb", "redis"])
def test_kill9_with_incremental_checkpoints_equals_uninterrupted(
    backend, broker, redis_server, unique, tmp_path
):
    broker.create_topic(f"{unique}.updates", 2)
    # a short session timeout: each restarted worker is assigned its partitions once the group has dropped
    # the killed one, which takes the killed worker's session timeout
    cfg = triangles_graph_config(
        tmp_path, unique, checkpoint_interval=0.2, batch_size=50, session_timeout_ms=3000
    )
    args = run_args(
        "triangles",
        broker.bootstrap,
        cfg,
        group=f"{unique}-g",
        state_dir=tmp_path / "s",
        redis=redis_server.url,
        extra=["--state-backend", backend],
    )
    kill9_mid_stream_then_catch_up(args, broker, unique, tmp_path, feed=(SAMPLE, "graph", 3.0))
    published = published_results(redis_server.url, f"{unique}.results", service="triangles")
    assert answer(published) == answer(offline_results(cfg, SAMPLE, service="triangles"))

    service = load_service("triangles")
    config = load_config(service, cfg)
    store = open_store(backend, f"triangles.{unique}-g", state_dir=tmp_path / "s", redis_url=redis_server.url)
    try:
        stored = [store.load(f"{unique}.updates", p) for p in (0, 1)]
    finally:
        store.close()
    assert all(not cp.snapshots for cp in stored)  # incremental engines are stored as entries only
    keys = {key for cp in stored for key in cp.entries}
    assert keys == set(published)
    for cp in stored:  # the envelope names this service and configuration
        check_envelope(cp.envelope, envelope_for(service, config.options), "stored", has_state=True)


def test_worker_refuses_state_of_another_configuration_in_one_line(broker, redis_server, unique, tmp_path):
    broker.create_topic(f"{unique}.updates", 1)
    trickle(broker.bootstrap, f"{unique}.updates", SAMPLE, "graph", 0.0)
    first = triangles_graph_config(tmp_path, unique)
    args = run_args("triangles", broker.bootstrap, first, group=f"{unique}-g", state_dir=tmp_path / "s")
    catch_up_with_workers(args, broker, unique, tmp_path)

    other = stream_config(
        tmp_path / "other.json", unique, mode="graph", strategy="first-order", key_field="graph"
    )
    proc = ivm(
        "run",
        *run_args("triangles", broker.bootstrap, other, group=f"{unique}-g", state_dir=tmp_path / "s"),
        check=False,
        timeout=60,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0
    assert len(lines) == 1 and lines[0].startswith("ivmstream: error: "), proc.stderr
    assert 'strategy="ivm-eps"' in lines[0] and 'strategy="first-order"' in lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rocksdb", "redis"])
def test_kill9_with_the_bag_in_the_store_equals_uninterrupted(
    backend, broker, redis_server, unique, tmp_path
):
    """The reference service with each key's bag read through the store (4 tuples cached): every kill
    lands with uncheckpointed work, and the stored bag is the replayed one, entry for entry."""
    from ivmstream.engine import store_backed_maps
    from ivmstream.service import DemoWorkload
    from ivmstream.testing import Case, check_kill9_restart

    service = load_service("reference")
    assert service.demo is not None
    workload = DemoWorkload(
        input=service.demo.input,
        config={**service.demo.config, "resident_entries": 4},
        partitions=service.demo.partitions,
        name="store-backed",
    )
    case = Case("reference", service, workload)
    kills = check_kill9_restart(case, broker, redis_server.url, tmp_path, unique, backend=backend)
    assert len(kills) == 2 and all(0 < k.checkpointed < k.total and k.published_beyond > 0 for k in kills)

    store = open_store(
        backend, f"reference.{unique}-g", state_dir=tmp_path / f"{unique}.state", redis_url=redis_server.url
    )
    try:
        stored = {k: v for p in range(3) for k, v in store.load(f"{unique}.updates", p).entries.items()}
    finally:
        store.close()
    replayed = case.events_by_key()
    assert stored.keys() == replayed.keys()
    for key, events in replayed.items():
        engine = service.engine(case.config.options)
        assert store_backed_maps(engine) == {"bag"}
        engine.apply(events)
        assert sorted(stored[key]) == sorted(engine.all_entries())


def test_tuning_options_stay_out_of_the_envelope():
    """A cache size does not change what the stored entries mean: restarting with another is allowed,
    while an option that does (allow_negative) still refuses the state."""
    service = load_service("reference")
    small = envelope_for(service, resolve_options(service, {"resident_entries": 10}))
    large = envelope_for(service, resolve_options(service, {"resident_entries": 10_000}))
    assert small == large
    check_envelope(small.to_bytes(), large, "stored", has_state=True)
    other = envelope_for(service, resolve_options(service, {"allow_negative": True}))
    with pytest.raises(StateError, match="allow_negative=true"):
        check_envelope(other.to_bytes(), large, "stored", has_state=True)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rocksdb", "redis"])
def test_kill9_with_one_resident_engine_per_partition_equals_uninterrupted(
    backend, broker, redis_server, unique, tmp_path
):
    """``resident_keys: 1``: after each checkpoint a partition keeps one engine and reads the others back
    from the store when their key is next seen; killed twice mid-stream, the results are the replay's."""
    from ivmstream.service import DemoWorkload
    from ivmstream.testing import Case, check_kill9_restart

    service = load_service("reference")
    assert service.demo is not None
    workload = DemoWorkload(
        input=service.demo.input,
        config={**service.demo.config, "resident_keys": 1, "checkpoint_interval": 0.1},
        partitions=service.demo.partitions,
        name="one-resident",
    )
    case = Case("reference", service, workload)
    assert len(case.events_by_key()) > service.demo.partitions  # some partition holds several keys
    kills = check_kill9_restart(case, broker, redis_server.url, tmp_path, unique, backend=backend)
    assert len(kills) == 2 and all(0 < k.checkpointed < k.total for k in kills)
