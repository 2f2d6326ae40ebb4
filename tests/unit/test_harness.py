"""A real Worker over the in-memory cluster (ivmstream.runtime.harness): every service's workloads give
what ivmstream.replay computes, also across a crash and a restart from the last checkpoint; refused
records reach the dead-letter topic by one path whatever the log level; hooks report what happened."""

from __future__ import annotations

import dataclasses
import logging
import random
from typing import Any

import orjson
import pytest

from ivmstream import changelog
from ivmstream.config import ServiceConfig, build_config, schema_of
from ivmstream.events import SourceRecord
from ivmstream.replay import KEYLESS, replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks, RecordsRefused
from ivmstream.runtime.routing import routing_of
from ivmstream.service import load_service
from ivmstream.state import MemoryStore
from ivmstream.testing import Case, conformance_cases

CASES = conformance_cases()


class Crash(Exception):
    pass


def _setup(case: Case, **settings: Any) -> tuple[InMemoryCluster, ServiceConfig]:
    config = dataclasses.replace(
        case.config, input_topic="in", output_topic="out", dlq_topic="dlq", **settings
    )
    cluster = InMemoryCluster()
    cluster.create_topic("in", case.workload.partitions)
    for record in case.records:
        cluster.produce("in", record.value, record.key)
    return cluster, config


def _replayed(case: Case) -> dict[str, Any]:
    run = replay_all(case.service, case.config, case.records)
    return run.result() if case.keyed else {KEYLESS: run.result()}


def _published(cluster: InMemoryCluster) -> dict[str, Any]:
    """Each key's latest published result."""
    latest = {}
    for value in cluster.values("out"):
        record = orjson.loads(value or b"")
        latest[record["key"]] = record["result"]
    return latest


def _run(worker: Worker) -> dict[str, Any]:
    results: dict[str, Any] = {}

    def keep(w: Worker) -> bool:
        results.update(w.results())
        return False

    run_to_end(worker, until=keep)
    return results


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_worker_without_a_broker_publishes_what_replay_computes(case):
    cluster, config = _setup(case)
    results = _run(Worker(case.service, config, cluster, MemoryStore(), group="g"))
    want = _replayed(case)
    assert results == want
    assert _published(cluster) == want


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_crash_and_a_restart_from_the_last_checkpoint_change_nothing(case):
    cluster, config = _setup(case, batch_size=max(1, len(case.records) // 10), checkpoint_interval=0.0)
    store = MemoryStore()
    batches: list[BatchApplied] = []

    def crash_midway(batch: BatchApplied) -> None:
        batches.append(batch)
        if len(batches) == 4:
            raise Crash  # after this batch was applied and published, before its checkpoint

    first = Worker(case.service, config, cluster, store, group="g", hooks=Hooks(batch_applied=[crash_midway]))
    with pytest.raises(Crash):
        run_to_end(first)
    stored = {p: store.load("in", p).offset or 0 for p in range(case.workload.partitions)}
    ends = cluster.end_offsets("in")
    assert 0 < sum(stored.values()) < sum(ends.values())  # the restart resumes mid-way, not from scratch
    results = _run(Worker(case.service, config, cluster, store, group="g"))
    want = _replayed(case)
    assert results == want
    assert _published(cluster) == want


REFERENCE = load_service("reference")
BAD = [b"{not json", b'{"relation": "nope", "row": {}, "delta": 1}', b"x" * 10]


def _reference(cluster: InMemoryCluster, hooks: Hooks | None = None) -> Worker:
    config = build_config(
        REFERENCE, {"key_field": "store", "input_topic": "in", "output_topic": "out", "dlq_topic": "dlq"}
    )
    return Worker(REFERENCE, config, cluster, MemoryStore(), group="g", hooks=hooks)


def _with_bad_records() -> InMemoryCluster:
    cluster = InMemoryCluster()
    cluster.create_topic("in", 2)
    good = orjson.dumps(
        {"relation": "items", "row": {"item": "a", "qty": 2, "price": "1.5", "store": "s"}, "delta": 1}
    )
    for value in (good, *BAD, good):
        cluster.produce("in", value, b"s")
    return cluster


def _dead_letters(cluster: InMemoryCluster) -> list[tuple[bytes | None, dict[str, Any]]]:
    return [
        (m.value(), {k: v for k, v in m.headers() or [] if k in ("ivmstream.reason", "ivmstream.source")})
        for m in cluster.messages("dlq")
    ]


@pytest.mark.parametrize("level", [logging.WARNING, logging.DEBUG])
def test_refused_records_take_one_path_to_the_dead_letter_topic_at_any_log_level(level, caplog):
    caplog.set_level(level, logger="ivmstream.runtime")
    refused: list[RecordsRefused] = []
    cluster = _with_bad_records()
    run_to_end(_reference(cluster, Hooks(records_refused=[refused.append])))
    letters = _dead_letters(cluster)
    assert [value for value, _ in letters] == BAD
    assert {h["ivmstream.reason"] for _, h in letters} == {b"malformed-json", b"unknown-relation"}
    assert sum(sum(r.counts.values()) for r in refused) == len(BAD)


def test_hooks_report_assignment_batches_checkpoints_and_revocation():
    seen: list[str] = []
    hooks = Hooks(
        batch_received=[lambda n: seen.append(f"received {n}")],
        batch_applied=[lambda b: seen.append(f"applied {b.applied} of {b.records}")],
        checkpoint_written=[lambda c: seen.append(f"checkpoint {c.partitions}")],
        partitions_assigned=[lambda c: seen.append(f"assigned {c.partitions}")],
        partitions_revoked=[lambda c: seen.append(f"revoked {c.partitions} lost={c.lost}")],
    )
    cluster = _with_bad_records()
    worker = _reference(cluster, hooks)
    run_to_end(worker)
    assert seen == [
        "assigned (0, 1)",
        f"received {2 + len(BAD)}",
        f"applied 2 of {2 + len(BAD)}",
        "checkpoint 1",  # the final one, then the revocation's (nothing changed since)
        "checkpoint 0",
        "revoked (0, 1) lost=False",
    ]
    assert (
        worker.metrics.registry.get_sample_value("ivmstream_checkpoints_total", {"service": "reference"}) == 1
    )


# --- a sharded query and its coordinator ---------------------------------------------------------------

FIVM = load_service("fivm")
SHARDED_QUERY = {
    "relations": {
        "Inventory": [{"locn": "int"}, {"ksn": "int"}, {"units": "int"}],
        "Location": [{"locn": "int"}, {"zip": "int"}],
        "Census": [{"zip": "int"}, {"pop": "int"}],
        "Item": [{"ksn": "int"}, {"price": "int"}],
    },
    "variable_order": {"locn": {"zip": {"pop": {}}, "ksn": {"units": {}, "price": {}}}},
    "ring": "sum",
    "sum": ["units", "price"],
}


def _fivm_events(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, inserted = [], []
    for _ in range(n):
        if inserted and rng.random() < 0.25:
            ev = {**rng.choice(inserted), "delta": -1}
        else:
            rel = rng.choice(sorted(SHARDED_QUERY["relations"]))
            row = {c: rng.randrange(6) for col in SHARDED_QUERY["relations"][rel] for c in col}
            ev = {"relation": rel, "row": row, "delta": rng.choice([1, 1, 2])}
            inserted.append({k: v for k, v in ev.items() if k != "delta"})
        out.append(orjson.dumps(ev))
    return out


def test_sharded_workers_and_their_coordinator_equal_one_unsharded_replay():
    topics = {"input_topic": "in", "output_topic": "partials", "dlq_topic": "dlq"}
    sharded = build_config(FIVM, {**SHARDED_QUERY, **topics, "shard_by": "locn", "batch_size": 50})
    cluster = InMemoryCluster()
    cluster.create_topic("in", 2)
    cluster.create_topic(sharded.broadcast_topic, 1)
    routing = routing_of(schema_of(FIVM, sharded).relations.values(), sharded, 2)
    values = _fivm_events(600, seed=7)
    for value in values:
        to = routing.route(value)
        cluster.produce(to.topic, value, to.key, to.partition)
    broadcast_end = len(cluster.messages(sharded.broadcast_topic))
    assert 0 < broadcast_end < len(values)

    def all_applied(w: Worker) -> bool:
        ends = cluster.end_offsets("in")
        return (
            all(
                (s.next_offset or 0) >= ends[p] and (s.broadcast_next or 0) >= broadcast_end
                for p, s in w.partitions.items()
            )
            and len(w.partitions) == 2
        )

    Worker(FIVM, sharded, cluster, MemoryStore(), group="w").run(until=all_applied)
    coordinator = Worker(FIVM, sharded, cluster, MemoryStore(), group="c", role="coordinator")
    run_to_end(coordinator)
    (final,) = _published_to(cluster, sharded.global_topic).values()
    unsharded = build_config(FIVM, {**SHARDED_QUERY, **topics})
    records = [SourceRecord(i, v) for i, v in enumerate(values)]
    want = replay_all(FIVM, unsharded, records).result()
    assert want["value"] != 0  # the join is not empty, so the comparison says something
    assert {k: v for k, v in final.items() if k != "stats"} == {k: v for k, v in want.items() if k != "stats"}


def _published_to(cluster: InMemoryCluster, topic: str) -> dict[str, Any]:
    latest = {}
    for value in cluster.values(topic):
        record = orjson.loads(value or b"")
        latest[record["key"]] = record["result"]
    return latest


# --- emit: every-event ----------------------------------------------------------------------------------


def test_every_event_changelog_replays_into_the_results_across_a_crash():
    case = next(c for c in CASES if c.name == "reference")
    cluster, config = _setup(case, emit="every-event", batch_size=97, checkpoint_interval=0.0)
    store = MemoryStore()
    crashed: list[int] = []

    def crash_once(batch: BatchApplied) -> None:
        if len(crashed) < 5:
            crashed.append(batch.records)
            if len(crashed) == 5:
                raise Crash

    with pytest.raises(Crash):
        run_to_end(
            Worker(case.service, config, cluster, store, group="g", hooks=Hooks(batch_applied=[crash_once]))
        )
    run_to_end(Worker(case.service, config, cluster, store, group="g"))
    seen: set[str] = set()
    docs: dict[str, Any] = {}
    for value in cluster.values("out"):
        record = orjson.loads(value or b"")
        if record["event"] in seen:
            continue  # published again after the crash: the same record
        seen.add(record["event"])
        docs[record["key"]] = changelog.apply(docs.get(record["key"], {}), record["patch"])
    assert docs == _replayed(case)
