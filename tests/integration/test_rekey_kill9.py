"""A keyed view (key_field ``tenant``) over two Debezium topics partitioned by primary key, on the
embedded broker: ``ivmstream rekey`` writes the re-keyed topic and ``ivmstream run`` keeps the view.
Each is killed with SIGKILL mid-stream and restarted; the published view then equals the offline replay
of the change records, and each bad record is in the dead-letter topic with its reason."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import (
    headers,
    kill9,
    read_topic,
    run_args,
    start_command,
    start_worker,
    stop_worker,
    write_config,
)

from ivmstream import changelog
from ivmstream.config import build_config
from ivmstream.replay import replay_all
from ivmstream.service import load_service
from tests.helpers_cdc import RELATIONS, Workload, offline_keyed, produce_paced, workload


def _start_step(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return start_command("rekey", *args, log=log, append=True)


def _published(bootstrap: str, topic: str) -> dict[str, Any]:
    latest: dict[str, Any] = {}
    for msg in read_topic(bootstrap, topic, timeout=5):
        record = orjson.loads(msg.value())
        latest[record["key"]] = record["result"]
    return dict(sorted(latest.items()))


def _wait(
    what: str,
    done: Callable[[], bool],
    procs: list[subprocess.Popen[bytes]],
    logs: list[Path],
    seconds: float,
) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        failed = [log.read_text() for p, log in zip(procs, logs, strict=True) if p.poll() is not None]
        assert not failed and time.monotonic() < deadline, (what, *failed)
        time.sleep(0.2)


def _view_config(
    tmp_path: Path, topics: tuple[str, str], rekey_topic: str, unique: str, **extra: Any
) -> Path:
    return write_config(
        tmp_path / "view.yaml",
        relations=RELATIONS,
        inputs=[{"topic": t, "format": "debezium-json"} for t in topics],
        rekey_topic=rekey_topic,
        output_topic=f"{unique}.out",
        dlq_topic=f"{unique}.dlq",
        batch_size=20,
        checkpoint_interval=10.0,  # the kills land on work neither has checkpointed
        **extra,
    )


def _kill9_both_mid_stream(
    broker, unique: str, tmp_path: Path, w: Workload, config: Path, step_topic: str, done: Callable[[], bool]
) -> list[str]:
    """``ivmstream rekey`` and ``ivmstream run`` over ``w``'s records produced at a pace: the step is
    killed with SIGKILL once a third of them are on ``step_topic`` (the second half of the input waits
    for the kills) and restarted, the worker once 50 records are published and restarted; both then run
    until ``done`` and stop cleanly. The origin tags on ``step_topic``, with the copies the kill left."""
    step_args = run_args(
        "reference", broker.bootstrap, config, group=f"{unique}-rk", state_dir=tmp_path / "rk"
    )
    worker_args = run_args(
        "reference", broker.bootstrap, config, group=f"{unique}-g", state_dir=tmp_path / "s"
    )
    out = f"{unique}.out"
    logs = [tmp_path / "step.log", tmp_path / "worker.log"]
    hold = threading.Event()
    feeder = threading.Thread(target=produce_paced, args=(broker.bootstrap, w, hold), daemon=True)
    feeder.start()
    step = _start_step(*step_args, log=logs[0])
    worker = start_worker(*worker_args, log=logs[1])
    try:
        _wait(
            "a third written by the step",
            lambda: len(read_topic(broker.bootstrap, step_topic, timeout=3)) >= len(w.records) // 3,
            [step, worker],
            logs,
            60,
        )
        kill9(step, logs[0])
        assert feeder.is_alive(), "the step's kill landed after the end of the input"
        step = _start_step(*step_args, log=logs[0])
        _wait(
            "results published",
            lambda: len(read_topic(broker.bootstrap, out, timeout=3)) >= 50,
            [step, worker],
            logs,
            60,
        )
        kill9(worker, logs[1])
        worker = start_worker(*worker_args, log=logs[1])
        hold.set()
        feeder.join()
        _wait("the expected view", done, [step, worker], logs, 180)
    finally:
        hold.set()
        codes = [stop_worker(p) for p in (step, worker)]
    assert codes == [0, 0], [log.read_text() for log in logs]
    tags = [headers(m)["ivmstream.origin"] for m in read_topic(broker.bootstrap, step_topic, timeout=10)]
    assert len(tags) > len(set(tags)), "the step's kill left no copies for the worker to drop"
    return tags


@pytest.mark.slow
def test_kill9_of_the_rekeying_step_and_of_the_worker_equals_the_offline_replay(
    broker, unique, tmp_path: Path
):
    topics = (f"{unique}.orders", f"{unique}.customers")
    rekeyed, out, dlq = f"{unique}.rekeyed", f"{unique}.out", f"{unique}.dlq"
    for topic in topics:
        broker.create_topic(topic, 4)
    broker.create_topic(rekeyed, 3)
    w = workload(seed=13, changes=3000, topics=topics, key_field="tenant")
    config = _view_config(tmp_path, topics, rekeyed, unique, key_field="tenant")
    expected = offline_keyed(w, load_service("reference"), "tenant", topics)
    _kill9_both_mid_stream(
        broker, unique, tmp_path, w, config, rekeyed, lambda: _published(broker.bootstrap, out) == expected
    )
    reasons = Counter(headers(m)["ivmstream.reason"] for m in read_topic(broker.bootstrap, dlq, timeout=10))
    assert set(reasons) == set(w.bad) and all(reasons[r] >= n for r, n in w.bad.items()), (reasons, w.bad)


def _changelog(bootstrap: str, topic: str) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The changelog read once per event id, patches applied in order; and every patch published per id."""
    docs: dict[str, Any] = {}
    patches: dict[str, list[Any]] = {}
    for msg in read_topic(bootstrap, topic, timeout=5):
        record = orjson.loads(msg.value())
        seen = record["event"] in patches
        patches.setdefault(record["event"], []).append(record["patch"])
        if not seen:
            docs[record["key"]] = changelog.apply(docs.get(record["key"], {}), record["patch"])
    return docs, patches


@pytest.mark.slow
def test_kill9_of_the_step_and_of_a_keyless_view_publishing_every_event(broker, unique, tmp_path: Path):
    """``emit: every-event`` over two Debezium topics: the step writes every event to a one-partition log;
    both are killed mid-stream; the changelog, read once per event id, replays into the final tables,
    and a record published again after the worker's kill is the same record."""
    topics = (f"{unique}.orders", f"{unique}.customers")
    log_topic, out = f"{unique}.log", f"{unique}.out"
    for topic in topics:
        broker.create_topic(topic, 4)
    broker.create_topic(log_topic, 1)
    w = workload(seed=17, changes=1500, topics=topics)
    config = _view_config(tmp_path, topics, log_topic, unique, emit="every-event")
    service = load_service("reference")
    final = replay_all(service, build_config(service, {"relations": RELATIONS}), w.final_events()).result()
    expected = orjson.loads(orjson.dumps(final))
    tags = _kill9_both_mid_stream(
        broker,
        unique,
        tmp_path,
        w,
        config,
        log_topic,
        lambda: list(_changelog(broker.bootstrap, out)[0].values()) == [expected],
    )
    _docs, patches = _changelog(broker.bootstrap, out)
    assert len(patches) == len(set(tags))  # one changelog record per event
    assert all(all(p == ps[0] for p in ps) for ps in patches.values())  # published again: the same record
