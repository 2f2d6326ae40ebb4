"""Change logs exist only where a checkpoint reads them: ``replay`` and workers checkpointing whole
snapshots keep none, a worker checkpointing entries holds none right after a checkpoint, and what it
hands out adds up to the engine's entries (ivmstream.testing.check_change_log). Checked through each
engine's own count of the records its log holds (``pending_changes``), not through time or memory."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ivmstream.engine import CountsPendingChanges
from ivmstream.replay import replay_all
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.state import MemoryStore
from ivmstream.testing import Case, check_change_log, conformance_cases

CASES = conformance_cases()
cases = pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
# The reference engine's bag marks its changed tuples inside the map that holds them (its entries are
# either clean or dirty), so it keeps no log beside its state and has nothing to count.
COUNTED = {"firstorder", "fivm", "reservoir", "sketches", "triangles", "vwap"}


def test_the_engines_that_log_changes_count_them():
    counted = {c.name for c in CASES if isinstance(c.engine(), CountsPendingChanges)}
    assert counted >= COUNTED


@cases
def test_replay_keeps_no_change_log(case: Case):
    run = replay_all(case.service, case.config, case.records)
    assert run.engines
    for key, engine in run.engines.items():
        if isinstance(engine, CountsPendingChanges):
            assert engine.pending_changes() == 0, (key, engine.pending_changes())


@cases
def test_a_log_starts_at_a_checkpoint_and_adds_up_to_the_entries(case: Case):
    checked = check_change_log(case)
    assert checked > 0 or case.name not in COUNTED


def _worker(case: Case, layout: str) -> tuple[Worker, InMemoryCluster]:
    config = dataclasses.replace(
        case.config,
        input_topic="in",
        output_topic="out",
        dlq_topic="dlq",
        state_layout=layout,
        checkpoint_interval=1e9,
        batch_size=8,  # so the middle of the input falls between batches
    )
    cluster = InMemoryCluster()
    cluster.create_topic("in", case.workload.partitions)
    for record in case.records:
        cluster.produce("in", record.value, record.key)
    return Worker(case.service, config, cluster, MemoryStore(), group="g"), cluster


def _pending_around_checkpoints(case: Case, layout: str) -> dict[str, list[int]]:
    """The workload through a worker that checkpoints at the middle of the input and at its end: the
    engines' pending changes just before and just after each of the two checkpoints."""
    worker, cluster = _worker(case, layout)
    ends = cluster.end_offsets("in")
    middle = {p: end // 2 for p, end in ends.items()}
    seen: dict[str, list[int]] = {}

    def counts(w: Any) -> list[int]:
        return [
            e.pending_changes()
            for state in w.partitions.values()
            for e in state.engines.values()
            if isinstance(e, CountsPendingChanges)
        ]

    def checkpoint(w: Any, when: str) -> None:
        seen[f"{when} before"] = counts(w)
        w.checkpoint()
        seen[f"{when} after"] = counts(w)

    def watch(w: Any) -> bool:
        positions = w.positions()
        if "middle before" not in seen and all((positions.get(p) or 0) >= m for p, m in middle.items()):
            checkpoint(w, "middle")
        if all((positions.get(p) or 0) >= end for p, end in ends.items()):
            checkpoint(w, "end")
            return True
        return False

    run_to_end(worker, until=watch)
    return seen


DEMOS = [c for c in CASES if c.workload is c.service.demo and c.name in COUNTED]


@pytest.mark.parametrize("case", DEMOS, ids=str)
def test_a_worker_checkpointing_snapshots_keeps_no_change_log(case: Case):
    seen = _pending_around_checkpoints(case, "snapshot")
    assert seen["end before"], "no engine"
    assert {n for counts in seen.values() for n in counts} == {0}, seen


@pytest.mark.parametrize("case", DEMOS, ids=str)
def test_a_worker_checkpointing_entries_logs_between_checkpoints_only(case: Case):
    """Nothing before the first checkpoint takes the state, the second half's changes before the
    second, nothing right after either."""
    seen = _pending_around_checkpoints(case, "incremental")
    assert set(seen["middle before"]) == {0}, seen
    assert sum(seen["end before"]) > 0, seen
    assert set(seen["middle after"]) == set(seen["end after"]) == {0}, seen


def test_an_upsert_image_table_logs_only_once_a_checkpoint_took_it():
    from ivmstream.events.changes import ImageTable

    table = ImageTable()
    for i in range(100):
        table.put("items", str(i), {"id": i})
    table.put("items", "7", None)
    assert not table._changed  # replay: nothing will read a log
    first = table.changed_entries()  # a checkpoint takes the table: every row
    assert len(first) == 99 and all(value is not None for _m, _k, value in first)
    table.put("items", "8", None)
    table.put("items", "100", {"id": 100})
    assert sorted(k for _m, k, _v in table.changed_entries()) == [b'["items","100"]', b'["items","8"]']
    assert table.changed_entries() == []
