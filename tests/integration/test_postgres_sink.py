"""The PostgreSQL sink against a real server: rows never regress, numeric results reach the history
(pruned past the retention), listeners are notified, a value PostgreSQL cannot hold skips its row only,
an unreachable server stops the worker; and a real Worker's rows equal the replay, also across a crash
and a restart, and when its checkpoints covered results the sink had not written."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import psycopg
import pytest

from ivmstream.dev.postgres_server import PostgresServer
from ivmstream.replay import KEYLESS, replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks
from ivmstream.runtime.output import DeliveryFailed
from ivmstream.runtime.postgres import CHANNEL, PostgresSink, SinkFailed, numeric_leaves, view_name
from ivmstream.state import MemoryStore
from ivmstream.testing import conformance_cases


def _record(key: str, result: Any, offset: int, at: float | None = None) -> dict[str, Any]:
    return {
        "service": "s",
        "key": key,
        "result": result,
        "offsets": {"in:0": offset},
        "published_at": at or time.time(),
    }


def _rows(dsn: str, view: str) -> dict[str, tuple[Any, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT key, result, offsets FROM ivmstream_results WHERE service = %s", (view,)
        ).fetchall()
    return {key: (result, offsets) for key, result, offsets in rows}


def _history(dsn: str, view: str) -> list[tuple[str, str, float]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT key, path, value FROM ivmstream_result_history WHERE service = %s ORDER BY at, key, path",
            (view,),
        ).fetchall()


def test_a_row_is_replaced_only_by_a_result_covering_later_offsets(postgres_server, unique):
    sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01)
    try:
        sink.submit([("a", _record("a", {"value": 1}, 10)), ("b", _record("b", 5, 3))])
        sink.flush(10)
        sink.submit([("a", _record("a", {"value": 0}, 7))])  # a replay after a crash: older input
        sink.flush(10)
        sink.submit([("a", _record("a", {"value": 9}, 10))])  # the same offsets: nothing new
        sink.flush(10)
        assert _rows(postgres_server.dsn, unique) == {
            "a": ({"value": 1}, {"in:0": 10}),
            "b": (5, {"in:0": 3}),
        }
        sink.submit([("a", _record("a", {"value": 2}, 11)), ("b", _record("b", 6, 4))])
        sink.flush(10)
        assert _rows(postgres_server.dsn, unique) == {
            "a": ({"value": 2}, {"in:0": 11}),
            "b": (6, {"in:0": 4}),
        }
    finally:
        sink.close()
    # only the changes reached the history, one row per numeric leaf
    assert sorted(_history(postgres_server.dsn, unique)) == [
        ("a", "/value", 1.0),
        ("a", "/value", 2.0),
        ("b", "", 5.0),
        ("b", "", 6.0),
    ]


def test_offsets_of_several_partitions_compare_partition_by_partition(postgres_server, unique):
    sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01)
    try:
        first = _record("k", 1, 0) | {"offsets": {"in:0": 5, "in:1": 5}}
        behind = _record("k", 2, 0) | {"offsets": {"in:0": 9, "in:1": 4}}  # one partition behind
        ahead = _record("k", 3, 0) | {"offsets": {"in:0": 5, "in:1": 6}}
        for record in (first, behind):
            sink.submit([("k", record)])
            sink.flush(10)
        assert _rows(postgres_server.dsn, unique)["k"][0] == 1
        sink.submit([("k", ahead)])
        sink.flush(10)
        assert _rows(postgres_server.dsn, unique)["k"][0] == 3
    finally:
        sink.close()


def test_numeric_leaves_are_json_pointers_shallowest_first():
    result = {"vwap": 1.5, "n": 2, "ok": True, "model": {"a/b": [1, None, 2.5]}, "s": "x", "inf": 1e400}
    assert list(numeric_leaves(result, 10)) == [
        ("/vwap", 1.5),
        ("/n", 2.0),
        ("/model/a~1b/0", 1.0),
        ("/model/a~1b/2", 2.5),
    ]
    assert list(numeric_leaves(result, 2)) == [("/vwap", 1.5), ("/n", 2.0)]
    deep_first = {"sketch": {"r": list(range(100))}, "rows_scanned": 5}
    assert list(numeric_leaves(deep_first, 2)) == [("/rows_scanned", 5.0), ("/sketch/r/0", 0.0)]
    assert list(numeric_leaves(7, 5)) == [("", 7.0)]
    assert view_name("vwap.results") == "vwap" and view_name("custom") == "custom"


def test_history_past_the_retention_is_pruned(postgres_server, unique):
    sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01, history_retention=60.0)
    try:
        old = time.time() - 3600
        sink.submit([("a", _record("a", 1, 1, at=old)), ("b", _record("b", 1, 1))])
        sink.flush(10)
        sink._last_prune = 0.0  # prune with the next write
        sink.submit([("c", _record("c", 1, 1))])
        sink.flush(10)
    finally:
        sink.close()
    assert sorted(key for key, _, _ in _history(postgres_server.dsn, unique)) == ["b", "c"]


def test_listeners_are_told_which_keys_changed(postgres_server, unique):
    with psycopg.connect(postgres_server.dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01)
        try:
            sink.submit([("a", _record("a", 1, 1)), ("b", _record("b", 1, 1))])
            sink.flush(10)
        finally:
            sink.close()
        payloads = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    import orjson

    assert [orjson.loads(p) for p in payloads] == [{"service": unique, "keys": ["a", "b"]}]


def test_a_value_postgresql_cannot_hold_skips_its_row_only(postgres_server, unique):
    sink = PostgresSink(postgres_server.dsn, unique, flush_interval=0.01)
    try:
        sink.submit([("bad", _record("bad", {"s": "nul\u0000"}, 1)), ("good", _record("good", 1, 1))])
        sink.flush(10)
        assert sink.rows_refused == 1
    finally:
        sink.close()
    assert set(_rows(postgres_server.dsn, unique)) == {"good"}


def test_an_unreachable_server_fails_the_flush_after_the_retry_budget(unique):
    server = PostgresServer().start()
    sink = PostgresSink(server.dsn, unique, flush_interval=0.01, retry_seconds=1.0)
    try:
        server.stop()
        sink.submit([("a", _record("a", 1, 1))])
        started = time.monotonic()
        with pytest.raises(SinkFailed, match="cannot write results to PostgreSQL"):
            sink.flush(30)
        assert time.monotonic() - started < 15
        with pytest.raises(SinkFailed):
            sink.submit([("b", _record("b", 1, 2))])
    finally:
        server.stop()
        sink.close()


# --- a real Worker over the in-memory cluster ---------------------------------------------------------

CASE = next(c for c in conformance_cases() if c.keyed and len(c.records) >= 20)


class Crash(Exception):
    pass


def _loaded_cluster() -> InMemoryCluster:
    """An in-process broker whose topic "in" holds the case's records."""
    cluster = InMemoryCluster()
    cluster.create_topic("in", CASE.workload.partitions)
    for record in CASE.records:
        cluster.produce("in", record.value, record.key)
    return cluster


def _worker(
    cluster: InMemoryCluster,
    store: MemoryStore,
    dsn: str,
    view: str,
    hooks: Hooks | None = None,
    flush_interval: float = 0.01,
):
    config = dataclasses.replace(
        CASE.config,
        input_topic="in",
        output_topic=f"{view}.results",
        dlq_topic="dlq",
        batch_size=max(1, len(CASE.records) // 10),
        checkpoint_interval=0.0,
    )
    sink = PostgresSink(dsn, view_name(config.output_topic), flush_interval=flush_interval)
    return Worker(CASE.service, config, cluster, store, group="g", postgres=sink, hooks=hooks)


def test_a_workers_rows_equal_the_replay_across_a_crash_and_a_restart(postgres_server, unique):
    cluster = _loaded_cluster()
    store = MemoryStore()
    seen: list[BatchApplied] = []

    def crash_midway(batch: BatchApplied) -> None:
        seen.append(batch)
        if len(seen) == 4:
            raise Crash

    with pytest.raises(Crash):
        run_to_end(_worker(cluster, store, postgres_server.dsn, unique, Hooks(batch_applied=[crash_midway])))
    run_to_end(_worker(cluster, store, postgres_server.dsn, unique))
    run = replay_all(CASE.service, CASE.config, CASE.records)
    want = run.result() if CASE.keyed else {KEYLESS: run.result()}
    rows = _rows(postgres_server.dsn, unique)
    assert {key: result for key, (result, _) in rows.items()} == want
    ends = cluster.end_offsets("in")
    for key, (_, offsets) in rows.items():
        assert all(offsets[part] <= ends[int(part.rsplit(":", 1)[1])] for part in offsets), key


def test_results_the_sink_had_not_written_are_published_again_after_a_crash(postgres_server, unique):
    """Periodic checkpoints do not wait for PostgreSQL: a sink that never got to write (its interval
    longer than the run) leaves checkpoints covering results PostgreSQL lacks, and the restarted worker
    publishes exactly those again."""
    cluster = _loaded_cluster()
    store = MemoryStore()
    seen: list[BatchApplied] = []

    def crash_late(batch: BatchApplied) -> None:
        seen.append(batch)
        if len(seen) == 8:
            raise Crash

    slow = _worker(cluster, store, postgres_server.dsn, unique, Hooks(batch_applied=[crash_late]), 3600.0)
    with pytest.raises(Crash):
        run_to_end(slow)
    assert any(store.load("in", p).offset for p in range(CASE.workload.partitions))  # checkpointed
    assert _rows(postgres_server.dsn, unique) == {}  # and nothing written
    run_to_end(_worker(cluster, store, postgres_server.dsn, unique))
    run = replay_all(CASE.service, CASE.config, CASE.records)
    want = run.result() if CASE.keyed else {KEYLESS: run.result()}
    assert {key: result for key, (result, _) in _rows(postgres_server.dsn, unique).items()} == want


def test_a_worker_stops_when_postgresql_stays_away_and_a_restart_fills_it(unique):
    server = PostgresServer().start()
    port = server.port
    cluster = _loaded_cluster()
    store = MemoryStore()
    try:
        worker = _worker(cluster, store, server.dsn, unique)
        assert worker.output.postgres is not None
        worker.output.postgres.retry_seconds = 1.0
        server.stop()
        with pytest.raises(DeliveryFailed, match="PostgreSQL"):
            run_to_end(worker)
        server = PostgresServer(port=port).start()  # back, and empty
        run_to_end(_worker(cluster, store, server.dsn, unique))
        run = replay_all(CASE.service, CASE.config, CASE.records)
        want = run.result() if CASE.keyed else {KEYLESS: run.result()}
        assert {key: result for key, (result, _) in _rows(server.dsn, unique).items()} == want
    finally:
        server.stop()
