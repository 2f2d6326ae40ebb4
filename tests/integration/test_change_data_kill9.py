"""Two Debezium topics (one per table, 4 partitions each, keyed by primary key; snapshot, creates,
updates, deletes, tombstones, half the records schema-wrapped, some bad) consumed directly by a keyless
view on the embedded broker: after a kill -9 mid-stream and a restart, the view equals the final tables
and each bad change record is in the dead-letter topic with its reason."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from helpers import headers, kill9, read_topic, run_args, start_worker, stop_worker, write_config

from ivmstream.config import build_config
from ivmstream.replay import replay_all
from ivmstream.service import load_service
from tests.helpers_cdc import RELATIONS, produce_paced, workload


def _latest(bootstrap: str, topic: str) -> dict | None:
    msgs = read_topic(bootstrap, topic, timeout=5)
    return orjson.loads(msgs[-1].value()) if msgs else None


def _reflected(record: dict | None) -> int:
    return sum(record["offsets"].values()) if record else 0


@pytest.mark.slow
def test_kill9_keyless_view_over_debezium_topics_equals_the_final_tables(broker, unique, tmp_path: Path):
    topics = (f"{unique}.orders", f"{unique}.customers")
    for topic in topics:
        broker.create_topic(topic, 4)
    w = workload(seed=11, changes=3000, topics=topics)
    hold = threading.Event()  # the second half of the input waits for the kill
    feeder = threading.Thread(target=produce_paced, args=(broker.bootstrap, w, hold), daemon=True)
    total = len(w.records)
    out, dlq = f"{unique}.out", f"{unique}.dlq"
    config = write_config(
        tmp_path / "view.yaml",
        relations=RELATIONS,
        inputs=[{"topic": t, "format": "debezium-json"} for t in topics],
        output_topic=out,
        dlq_topic=dlq,
        batch_size=20,
        checkpoint_interval=0.05,
    )
    args = run_args("reference", broker.bootstrap, config, group=f"{unique}-g", state_dir=tmp_path / "s")
    log = tmp_path / "w.log"
    feeder.start()
    worker = start_worker(*args, log=log)
    deadline = time.monotonic() + 60
    while _reflected(_latest(broker.bootstrap, out)) < total // 3:
        assert time.monotonic() < deadline and worker.poll() is None, log.read_text()
        time.sleep(0.2)
    kill9(worker, log)
    killed_at = _reflected(_latest(broker.bootstrap, out))
    assert killed_at < total, "the kill landed after the end"
    hold.set()
    feeder.join()
    worker = start_worker(*args, log=log)
    try:
        deadline = time.monotonic() + 120
        while _reflected(_latest(broker.bootstrap, out)) < total:
            assert time.monotonic() < deadline and worker.poll() is None, log.read_text()
            time.sleep(0.3)
    finally:
        assert stop_worker(worker) == 0, log.read_text()
    service = load_service("reference")
    expected = replay_all(service, build_config(service, {"relations": RELATIONS}), w.final_events()).result()
    assert _latest(broker.bootstrap, out)["result"] == orjson.loads(orjson.dumps(expected))  # type: ignore[index]
    reasons = Counter(headers(m)["ivmstream.reason"] for m in read_topic(broker.bootstrap, dlq, timeout=10))
    assert set(reasons) == set(w.bad) and all(reasons[r] >= n for r, n in w.bad.items()), (reasons, w.bad)
