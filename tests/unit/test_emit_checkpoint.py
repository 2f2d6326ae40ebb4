"""``emit: checkpoint``: a worker holds each touched key's result back until the next checkpoint (or until
it has caught up), so a result that costs a pass over the state is computed once per checkpoint rather
than once per batch; every checkpoint covers published results, and the last one published equals
replay's, across a crash too."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from ivmstream.config import ConfigError, build_config
from ivmstream.replay import KEYLESS, replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks
from ivmstream.service import load_service
from ivmstream.state import MemoryStore
from ivmstream.testing import Case, conformance_cases

CASES = {str(c): c for c in conformance_cases()}
# A keyed workload (several keys on two partitions) and the service whose results scan its state.
NAMES = ["reference/demo", "sketches/demo", "vwap/demo"]


class Crash(Exception):
    pass


def _setup(case: Case, **settings: Any) -> tuple[InMemoryCluster, Any]:
    config = dataclasses.replace(
        case.config, input_topic="in", output_topic="out", dlq_topic="dlq", emit="checkpoint", **settings
    )
    cluster = InMemoryCluster()
    cluster.create_topic("in", case.workload.partitions)
    for record in case.records:
        cluster.produce("in", record.value, record.key)
    return cluster, config


def _records(cluster: InMemoryCluster) -> list[dict[str, Any]]:
    return [orjson.loads(value or b"") for value in cluster.values("out")]


def _latest(cluster: InMemoryCluster) -> dict[str, Any]:
    return {record["key"]: record["result"] for record in _records(cluster)}


def _replayed(case: Case) -> dict[str, Any]:
    run = replay_all(case.service, case.config, case.records)
    return run.result() if case.keyed else {KEYLESS: run.result()}


@pytest.mark.parametrize("name", NAMES)
def test_results_wait_for_the_checkpoint_and_the_last_equals_replay(name: str):
    case = CASES[name]
    cluster, config = _setup(case, batch_size=50, checkpoint_interval=1e9)
    batches: list[BatchApplied] = []
    published_before_end: list[int] = []

    def watch(w: Worker) -> bool:
        published_before_end.append(len(cluster.values("out")))
        return False

    worker = Worker(
        case.service, config, cluster, MemoryStore(), group="g", hooks=Hooks(batch_applied=[batches.append])
    )
    run_to_end(worker, until=watch)
    assert len(batches) > 2
    assert sum(b.published for b in batches) == 0  # no batch published
    assert set(published_before_end) == {0}  # nothing until the checkpoint at the end
    records = _records(cluster)
    assert len(records) == len({r["key"] for r in records})  # one record per key, at that checkpoint
    assert _latest(cluster) == _replayed(case)
    counted = worker.metrics.registry.get_sample_value("ivmstream_results_out_total", {"service": case.name})
    assert counted == len(records)  # held-back results count as results out when they are published
    ends = cluster.end_offsets("in")
    for record in records:  # each reflects all of its partition's input
        assert all(
            ends[int(where.rsplit(":", 1)[1])] == offset for where, offset in record["offsets"].items()
        )


def test_each_checkpoint_publishes_the_keys_changed_since_the_one_before():
    case = CASES["reference/demo"]
    cluster, config = _setup(case, batch_size=100, checkpoint_interval=1e9)
    seen: list[int] = []
    worker = Worker(
        case.service,
        config,
        cluster,
        MemoryStore(),
        group="g",
        hooks=Hooks(batch_applied=[lambda batch: seen.append(batch.records)]),
    )
    counts: list[int] = []

    def midway(w: Worker) -> bool:
        if len(seen) == 2 and not counts:
            w.checkpoint()
            counts.append(len(cluster.values("out")))
        return False

    run_to_end(worker, until=midway)
    assert counts and counts[0] > 0  # the middle checkpoint published the keys touched so far
    assert len(cluster.values("out")) > counts[0]  # and the one at the end those touched after
    assert _latest(cluster) == _replayed(case)


def test_a_crash_before_a_checkpoint_publishes_the_held_results_after_the_restart():
    """Results held back when the worker dies are computed again from the last checkpoint and published:
    nothing is lost, and the final results equal replay's."""
    case = CASES["sketches/demo"]
    cluster, config = _setup(case, batch_size=60, checkpoint_interval=1e9)
    store = MemoryStore()
    batches: list[int] = []

    def crash_at_the_sixth(batch: BatchApplied) -> None:
        batches.append(batch.records)
        if len(batches) == 6:
            raise Crash  # batches 4 to 6 applied, their results held back

    def checkpoint_at_the_third(w: Worker) -> bool:
        if len(batches) == 3:
            w.checkpoint()
        return False

    first = Worker(
        case.service, config, cluster, store, group="g", hooks=Hooks(batch_applied=[crash_at_the_sixth])
    )
    with pytest.raises(Crash):
        run_to_end(first, until=checkpoint_at_the_third)
    stored = {p: store.load("in", p).offset or 0 for p in range(case.workload.partitions)}
    assert 0 < sum(stored.values()) < sum(cluster.end_offsets("in").values())
    before = len(cluster.values("out"))
    assert before > 0  # the checkpoint's results
    run_to_end(Worker(case.service, config, cluster, store, group="g"))
    assert _latest(cluster) == _replayed(case)


def test_a_keyless_view_over_inputs_refuses_emit_checkpoint():
    service = load_service("vwap")
    with pytest.raises(ConfigError, match="emit checkpoint needs key_field"):
        build_config(service, {"inputs": [{"topic": "bids", "format": "native"}], "emit": "checkpoint"})


def test_the_sketches_service_publishes_per_checkpoint_unless_the_config_says_otherwise():
    sketches = load_service("sketches")
    assert build_config(sketches, {}).emit == "checkpoint"
    assert build_config(sketches, {"emit": "batch"}).emit == "batch"
    # a keyless view over inputs publishes its one result per batch (emit checkpoint is refused there)
    assert build_config(sketches, {"inputs": [{"topic": "tpch", "format": "native"}]}).emit == "batch"
    assert build_config(load_service("reference"), {}).emit == "batch"
