"""Wire-level faults (shared/dev/faults.py) during a worker's run of a service's demo workload: the
template's and the keyless vwap's in ``make test``, every service's in ``make chaos``.

One worker per service runs through a script of faults, one per input part: slow responses, error
codes injected on Produce, Fetch, OffsetCommit, Heartbeat/JoinGroup/SyncGroup and FindCoordinator,
a coordinator move, partition leader moves and a one-second outage of every broker. Each
stacked error is checked to have been served to a client before the next part, so no step passes by
never happening. The worker must ride them all out, and what it published must equal ``replay``.

Then every broker stays down past ``broker_timeout``: the worker must exit non-zero with one clear
line, and a restart must resume exactly.

With the template service's workload only: a Produce of results or dead letters refused for good
(MSG_SIZE_TOO_LARGE, TOPIC_AUTHORIZATION_FAILED, INVALID_RECORD) stops the worker in one line before any
checkpoint covers it; and one broker of three down holds back only the partitions it leads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from reliability_runs import Run, demo_cases, parts, pin_to

from ivmstream.dev.broker import BrokerError, BrokerProcess
from ivmstream.events import SourceRecord
from ivmstream.partitioner import partition_for
from ivmstream.runtime.dlq import read_to_end
from ivmstream.testing import Case

# Each run takes 10-20 s. The faults hit the runtime every service shares: `make test` runs a keyed
# service over three partitions (the template's, also in the fast set) and the keyless one (one partition,
# the order-book format); `make chaos` (IVMSTREAM_CHAOS=long) runs every service's.
FAST = "reference"
SHORT = (FAST, "vwap")
LONG = os.environ.get("IVMSTREAM_CHAOS") == "long"
cases = pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=c.name, marks=() if c.name == FAST else pytest.mark.slow)
        for c in demo_cases()
        if LONG or c.name in SHORT
    ],
)

HOME = 1  # the broker that coordinates the group and leads the input partitions at the start
SESSION_MS = 2000
BROKER_TIMEOUT = 1.5  # seconds; a bounce stays below it, the final outage goes past it
BOUNCE = 1.0


@dataclass(frozen=True)
class Step:
    """One fault: how to inject it, how to tell it was served (None: it cannot be missed), how to heal."""

    name: str
    inject: Callable[[BrokerProcess, Run], object]
    served: Callable[[BrokerProcess, Run], bool] | None = None
    heal: Callable[[BrokerProcess, Run], object] | None = None


def _stack(api: str, *errors: str, broker: int = HOME) -> Callable[[BrokerProcess, Run], object]:
    """Stack errors for the next requests of type ``api`` that reach ``broker``."""
    return lambda b, _r: b.fault("broker-errors", broker=broker, api=api, errors=[(e, 0) for e in errors])


def _drained(*apis: str, broker: int = HOME) -> Callable[[BrokerProcess, Run], bool]:
    """Every error stacked on ``broker`` for these request types has been answered to some client."""
    return lambda b, _r: all(b.fault("pending", broker=broker, api=api) == "0" for api in apis)


def _group_errors(b: BrokerProcess, run: Run) -> None:
    """A heartbeat answered REBALANCE_IN_PROGRESS (partitions revoked and assigned again), while the
    rejoin meets a JoinGroup and a SyncGroup error. (Partitions lost rather than revoked: the bounce.)"""
    _stack("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS")(b, run)
    _stack("SyncGroup", "REBALANCE_IN_PROGRESS")(b, run)
    _stack("Heartbeat", "REBALANCE_IN_PROGRESS")(b, run)


def _coordinator_move(b: BrokerProcess, run: Run) -> None:
    """The group moves to broker 2 while FindCoordinator, which may go to any broker, fails once on each."""
    for broker in (1, 2, 3):
        _stack("FindCoordinator", "COORDINATOR_NOT_AVAILABLE", broker=broker)(b, run)
    b.fault("coordinator", group=run.group, broker=2)


def _find_coordinator_served(b: BrokerProcess, _run: Run) -> bool:
    return sum(int(b.fault("pending", broker=i, api="FindCoordinator")) for i in (1, 2, 3)) < 3


def _move_leaders(b: BrokerProcess, run: Run) -> None:
    for p in range(run.case.workload.partitions):
        b.fault("leader", topic=run.topic, partition=p, broker=3)


def _bounce(b: BrokerProcess, _run: Run) -> None:
    """Every broker down for less than broker_timeout, but close enough to the session timeout that the
    group may drop the member (its partitions are then lost and assigned again): the worker goes on."""
    b.fault("down", broker="all")
    time.sleep(BOUNCE)
    b.fault("up", broker="all")


STEPS = [
    Step(
        "rtt",
        lambda b, _r: b.fault("rtt", broker="all", ms=50),
        heal=lambda b, _r: b.fault("rtt", broker="all", ms=0),
    ),
    Step(
        "produce-errors",
        _stack("Produce", "NOT_LEADER_FOR_PARTITION", "_TRANSPORT", "REQUEST_TIMED_OUT"),
        _drained("Produce"),
    ),
    Step(
        "fetch-errors",
        _stack("Fetch", "NOT_LEADER_FOR_PARTITION", "_TRANSPORT", "UNKNOWN_LEADER_EPOCH"),
        _drained("Fetch"),
    ),
    Step(
        "offset-commit-errors",
        _stack("OffsetCommit", "COORDINATOR_NOT_AVAILABLE", "REBALANCE_IN_PROGRESS", "NOT_COORDINATOR"),
        _drained("OffsetCommit"),
    ),
    Step("group-errors", _group_errors, _drained("Heartbeat", "JoinGroup", "SyncGroup")),
    Step("coordinator-move", _coordinator_move, _find_coordinator_served),
    Step("leader-move", _move_leaders),
    Step("broker-bounce", _bounce),
]


@cases
def test_every_fault_during_a_run_leaves_results_equal_to_replay(
    case: Case, fault_broker: BrokerProcess, redis_server, unique, tmp_path: Path
):
    """The script above, then every broker down past broker_timeout: the worker exits with one line;
    a restart finishes the input, and the published results equal replay."""
    run = Run(case, fault_broker, redis_server.url, tmp_path, unique)
    run.prepare(
        batch_size=20, checkpoint_interval=0.2, session_timeout_ms=SESSION_MS, broker_timeout=BROKER_TIMEOUT
    )
    pin_to(fault_broker, run, HOME)
    chunks = parts(case.records, len(STEPS) + 2)
    worker = run.start_named("w")
    served = []
    try:
        for step, chunk in zip(STEPS, chunks, strict=False):
            step.inject(fault_broker, run)
            run.produce(chunk)
            if step.served is not None:
                done = partial(step.served, fault_broker, run)
                run.wait_for(worker, f"the {step.name} fault to be served", done, timeout=60)
            served.append(step.name)
            if step.heal is not None:
                step.heal(fault_broker, run)
        run.produce(chunks[-2])  # then at once the outage, so it meets work not yet checkpointed
        fault_broker.fault("down", broker="all")
        code = worker.wait(60)
    finally:
        if worker.poll() is None:
            worker.kill()
        fault_broker.fault("up", broker="all")
    assert served == [s.name for s in STEPS]
    assert code == 1, run.tail()
    errors = [line for line in run.logs().splitlines() if line.startswith("ivmstream: error:")]
    assert len(errors) == 1, run.tail()
    assert errors[0].startswith("ivmstream: error: no Kafka broker reachable at ")
    assert f"(broker_timeout {BROKER_TIMEOUT:g} s)" in errors[0]
    assert "Traceback" not in run.logs()

    _restart_and_finish(run, chunks[-1])


def _restart_and_finish(run: Run, rest: Sequence[SourceRecord]) -> None:
    """The rest of the input, a worker started again to catch up and stopped; the results equal replay."""
    run.produce(rest)
    worker = run.start_named("w")
    try:
        run.wait_for(worker, "catch-up after the restart", run.caught_up, timeout=60)
    finally:
        run.stop(worker)
    run.assert_published_equals_replay()


def test_fault_commands_answer_in_one_line_and_refuse_bad_arguments(fault_broker: BrokerProcess):
    offered = fault_broker.request("faults").split()
    assert offered[0] == "ok"
    assert {
        "down",
        "up",
        "rtt",
        "errors",
        "broker-errors",
        "pending",
        "clear",
        "coordinator",
        "leader",
    } <= set(offered[1:])
    fault_broker.create_topic("faulty", 2)
    assert fault_broker.fault("errors", api="Fetch", errors=["NOT_LEADER_FOR_PARTITION"]) == "errors Fetch 1"
    assert fault_broker.fault("clear", api="Fetch") == "clear Fetch"
    stacked = [("REBALANCE_IN_PROGRESS", 5), ("UNKNOWN_MEMBER_ID", 0)]
    fault_broker.fault("broker-errors", broker=2, api="Heartbeat", errors=stacked)
    assert fault_broker.fault("pending", broker=2, api="Heartbeat") == "2"
    assert fault_broker.fault("pending", broker=1, api="Heartbeat") == "0"
    assert fault_broker.fault("leader", topic="faulty", partition=1, broker=3) == "leader faulty 1 3"
    assert fault_broker.fault("coordinator", group="g", broker=2) == "coordinator g 2"
    assert fault_broker.fault("rtt", broker="all", ms=0) == "rtt all 0"
    for line, code in [
        ("down 4", "INVALID_BROKER"),
        ("down 0", "INVALID_BROKER"),
        ("pending all Fetch", "INVALID_BROKER"),
        ("errors Fletch NOT_COORDINATOR", "INVALID_API"),
        ("errors Fetch NOT_AN_ERROR", "INVALID_ERROR"),
        ("errors Fetch NOT_COORDINATOR:5", "INVALID_REQUEST"),
        ("rtt 1 -5", "INVALID_REQUEST"),
        ("rtt 1", "INVALID_REQUEST"),
        ("leader faulty x 1", "INVALID_REQUEST"),
    ]:
        reply = fault_broker.request(line)
        assert reply.startswith(f"error {code}: ") and "\n" not in reply, (line, reply)
    with pytest.raises(BrokerError) as refused:
        fault_broker.fault("down", broker=7)
    assert refused.value.code == "INVALID_BROKER"
    with pytest.raises(ValueError):
        fault_broker.fault("rtt", broker=1)  # a missing argument never reaches the broker


class _Lacking:
    """A cluster whose librdkafka lacks every fault symbol."""

    brokers = 3

    def has_symbol(self, symbol: str) -> bool:
        return False

    def call_mock(self, symbol: str, *args: object) -> int:
        raise AssertionError(f"{symbol} called although missing")


def test_a_missing_librdkafka_symbol_is_one_line_naming_it():
    from ivmstream.dev.faults import FaultError, run_fault
    from ivmstream.dev.mock_cluster import _lib

    assert run_fault(_Lacking(), _lib(), ["faults"]) == ""
    with pytest.raises(FaultError) as missing:
        run_fault(_Lacking(), _lib(), ["rtt", "1", "50"])
    assert missing.value.code == "UNSUPPORTED"
    assert str(missing.value) == (
        "UNSUPPORTED: this librdkafka has no rd_kafka_mock_broker_set_rtt, so 'rtt' is unavailable"
    )


def test_fault_lines_are_built_from_keywords():
    from ivmstream.dev.faults import fault_line

    assert fault_line("rtt", broker=1, ms=500) == "rtt 1 500"
    assert fault_line("errors", api="Fetch", errors=["A", "B"]) == "errors Fetch A,B"
    stacked = fault_line("broker-errors", broker=2, api="Produce", errors=[("A", 5)])
    assert stacked == "broker-errors 2 Produce A:5"
    with pytest.raises(ValueError):
        fault_line("leader", topic="has space", partition=0, broker=1)
    with pytest.raises(ValueError):
        fault_line("explode", broker=1)


# --------------------------------------------------------------------------- refused output, one broker down

# Errors a broker answers a Produce with for good (librdkafka does not retry them), and which topic
# they hit: the results topic's leader is broker 2, the dead-letter topic's broker 3.
REFUSALS = [
    ("results", "MSG_SIZE_TOO_LARGE"),
    ("results", "TOPIC_AUTHORIZATION_FAILED"),
    ("dlq", "INVALID_RECORD"),
]
LEADERS = {"results": 2, "dlq": 3}
BAD = SourceRecord(0, b'{"relation": "items", "row": ', b"east")  # dead-lettered: cut-off JSON


def _reference() -> Case:
    [case] = [c for c in demo_cases() if c.name == FAST]
    return case


def _outputs(run: Run) -> dict[str, str]:
    return {"results": run.output_topic, "dlq": f"{run.prefix}.dlq"}


def _lead_outputs(broker: BrokerProcess, run: Run, leaders: dict[str, int]) -> None:
    """Create the results and dead-letter topics, every partition of each led by its broker in ``leaders``."""
    for kind, topic in _outputs(run).items():
        broker.create_topic(topic, run.case.workload.partitions)
        for p in range(run.case.workload.partitions):
            broker.fault("leader", topic=topic, partition=p, broker=leaders[kind])


def _last_life(run: Run, name: str) -> str:
    return run.worker_log(name).read_text(errors="replace").rsplit("--- start", 1)[-1]


def test_a_refused_produce_stops_the_worker_in_one_line_and_a_restart_resumes_exactly(
    fault_broker: BrokerProcess, redis_server, unique, tmp_path: Path
):
    """Each error the broker answers a Produce of results with for good (not retried) stops the worker
    with one line naming the topic and the error, before any checkpoint covers the input whose results
    were refused; the restart (the error was answered once) publishes them, and the results equal replay."""
    run = Run(_reference(), fault_broker, redis_server.url, tmp_path, unique)
    run.prepare(batch_size=20, checkpoint_interval=0.2, session_timeout_ms=SESSION_MS)
    pin_to(fault_broker, run, HOME)
    _lead_outputs(fault_broker, run, LEADERS)
    chunks = parts(run.case.records, len(REFUSALS) + 1)
    done = 0
    for (kind, error), chunk in zip(REFUSALS, chunks, strict=False):
        worker = run.start_named("w")
        try:
            run.wait_for(worker, "the previous input checkpointed", partial(_checkpointed_all, run, done))
            fault_broker.fault("broker-errors", broker=LEADERS[kind], api="Produce", errors=[(error, 0)])
            half = len(chunk) // 2
            # to the input partitions, which broker HOME leads; a bad record makes a dead letter
            run.produce([*chunk[:half], *([BAD] if kind == "dlq" else []), *chunk[half:]])
            code = worker.wait(60)
        finally:
            if worker.poll() is None:
                worker.kill()
        life = _last_life(run, "w")
        errors = [line for line in life.splitlines() if line.startswith("ivmstream: error:")]
        assert code == 1 and len(errors) == 1, life
        assert _outputs(run)[kind] in errors[0] and error in errors[0], errors[0]
        assert "Traceback" not in life
        # no checkpoint covers input whose output was refused: with results, the whole part (the first
        # produce after the fault failed); with a dead letter, the bad record
        if kind == "results":
            assert _checkpointed(run) == done, (error, run.progress())
        else:
            [bad] = [m for m in read_to_end(fault_broker.bootstrap, run.topic) if m.value() == BAD.value]
            assert run.progress()[bad.partition()].committed <= bad.offset(), (bad.offset(), run.progress())
        done += len(chunk) + (kind == "dlq")
    _restart_and_finish(run, chunks[-1])


def _checkpointed(run: Run) -> int:
    return sum(p.committed for p in run.progress())


def _checkpointed_all(run: Run, records: int) -> bool:
    return _checkpointed(run) == records


def _owns_all(run: Run, name: str) -> bool:
    return run.owned(name) == run.case.workload.partitions


def _committed(run: Run) -> dict[int, int]:
    """The group's checkpoint per input partition, asked of the coordinator only (``run.progress`` also
    asks each partition's leader for its end)."""
    consumer = Consumer({"bootstrap.servers": run.broker.bootstrap, "group.id": run.group})
    try:
        tps = [TopicPartition(run.topic, p) for p in range(run.case.workload.partitions)]
        return {tp.partition: max(tp.offset, 0) for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def test_one_broker_down_holds_back_only_the_partitions_it_leads(
    fault_broker: BrokerProcess, redis_server, unique, tmp_path: Path
):
    """Broker 3 leads input partition 0 and goes down, past broker_timeout, while the others stay up:
    the partitions broker 1 leads are consumed and checkpointed to their end, partition 0 stays at its
    checkpoint, the worker keeps running, and a worker restarted then takes every partition; once
    broker 3 is back partition 0 catches up, and the results equal replay (nothing lost, nothing
    counted twice)."""
    run = Run(_reference(), fault_broker, redis_server.url, tmp_path, unique)
    run.prepare(
        batch_size=20, checkpoint_interval=0.2, session_timeout_ms=SESSION_MS, broker_timeout=BROKER_TIMEOUT
    )
    pin_to(fault_broker, run, HOME)
    fault_broker.fault("leader", topic=run.topic, partition=0, broker=3)
    _lead_outputs(fault_broker, run, {"results": 2, "dlq": 2})
    first, second = parts(run.case.records, 2)
    count = run.case.workload.partitions
    held = [r for r in second if partition_for(r.key, count) == 0]  # cannot be produced while 3 is down
    others = [r for r in second if partition_for(r.key, count) != 0]
    assert held and others
    worker = run.start_named("w")
    try:
        run.produce(first)
        run.wait_for(worker, "the first half checkpointed", run.caught_up, timeout=60)
        ends = {p.partition: p.high for p in run.progress()}
        for r in others:
            ends[partition_for(r.key, count)] += 1
        fault_broker.fault("down", broker=3)
        try:
            run.produce(others)
            up_ends = {p: end for p, end in ends.items() if p != 0}
            run.wait_for(
                worker,
                "the partitions on the brokers up checkpointed",
                lambda: {p: c for p, c in _committed(run).items() if p != 0} == up_ends,
                timeout=60,
            )
            time.sleep(BROKER_TIMEOUT)  # past broker_timeout: a partial outage must not stop the worker
            assert worker.poll() is None, run.tail()
            assert _committed(run)[0] == ends[0], (_committed(run), ends)
            # a worker (re)started meanwhile takes every partition, also the one it cannot read yet
            run.stop(worker)
            worker = run.start_named("w")
            run.wait_for(worker, "every partition assigned", partial(_owns_all, run, "w"), timeout=60)
            assert f"{run.topic}:0: its start offset is unknown" in _last_life(run, "w"), run.tail()
        finally:
            fault_broker.fault("up", broker=3)
        run.produce(held)
        run.wait_for(worker, "catch-up once broker 3 is back", run.caught_up, timeout=60)
    finally:
        run.stop(worker)
    assert "ivmstream: error" not in run.logs(), run.tail()
    run.assert_published_equals_replay()
