"""The worker's log says how many records it refused per reason, at most one line per interval: a flood
of bad input is a few lines, and none is lost at shutdown."""

from __future__ import annotations

import logging

import orjson

from ivmstream.config import build_config
from ivmstream.runtime import Worker
from ivmstream.runtime.harness import InMemoryCluster, run_to_end
from ivmstream.runtime.hooks import BatchApplied, Hooks, RecordsRefused
from ivmstream.runtime.sensors import RefusalLog
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

REFERENCE = load_service("reference")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "ivmstream.runtime" and "refused" in r.getMessage()
    ]


def test_counts_by_reason_at_most_one_line_per_interval(caplog):
    caplog.set_level(logging.WARNING, logger="ivmstream.runtime")
    clock = Clock()
    log = RefusalLog("svc", "svc.dlq", every=10.0, clock=clock)
    hooks = Hooks()
    log.attach(hooks)
    refuse, batch = hooks.records_refused[0], hooks.batch_applied[0]
    refuse(RecordsRefused("svc.updates", 0, {"wrong-type": 2}))  # the first at once
    for _ in range(100):
        refuse(RecordsRefused("svc.updates", 1, {"wrong-type": 1, "unknown-relation": 2}))
    batch(BatchApplied(10, 0, 0, 0.1))
    assert _lines(caplog) == [
        "svc: 2 records refused (wrong-type 2), 2 since start; dead letters in svc.dlq (ivmstream dlq svc)"
    ]
    clock.now += 10.0
    batch(BatchApplied(10, 0, 0, 0.1))  # the interval is over: what waited is written
    refuse(RecordsRefused("svc.updates", 0, {"misrouted": 1}))
    log.flush(force=True)  # at shutdown
    assert _lines(caplog)[1:] == [
        "svc: 300 records refused (unknown-relation 200, wrong-type 100), 302 since start; dead letters in "
        "svc.dlq (ivmstream dlq svc)",
        "svc: 1 records refused (misrouted 1), 303 since start; dead letters in svc.dlq (ivmstream dlq svc)",
    ]


def test_a_worker_logs_its_refusals(caplog):
    caplog.set_level(logging.WARNING, logger="ivmstream.runtime")
    cluster = InMemoryCluster()
    cluster.create_topic("in", 1)
    good = {"relation": "items", "row": {"item": "a", "qty": 2, "price": "1.5"}, "delta": 1}
    for value in (orjson.dumps(good), b"{not json", b'{"relation": "nope", "row": {}, "delta": 1}', b"[1"):
        cluster.produce("in", value)
    config = build_config(REFERENCE, {"input_topic": "in", "output_topic": "out", "dlq_topic": "dlq"})
    run_to_end(Worker(REFERENCE, config, cluster, MemoryStore(), group="g"))
    assert _lines(caplog) == [
        "reference: 3 records refused (malformed-json 2, unknown-relation 1), 3 since start; dead letters in "
        "dlq (ivmstream dlq reference)"
    ]
