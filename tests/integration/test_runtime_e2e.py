"""produce -> run -> results through the real CLI, broker process and redis-server, vs. replay."""

from __future__ import annotations

import json

from helpers import SAMPLE, ivm, published_results, replay_result, start_worker, stop_worker, write_config

from shared.runtime.progress import wait_caught_up


def test_produce_run_results_equal_replay(broker, redis_server, unique, tmp_path):
    topic, out_topic, group = f"{unique}.updates", f"{unique}.results", f"{unique}-g"
    broker.create_topic(topic, 3)
    config = write_config(
        tmp_path / "ref.json",
        key_field="store",
        input_topic=topic,
        output_topic=out_topic,
        dlq_topic=f"{unique}.dlq",
        checkpoint_interval=0.2,
    )

    produced = ivm(
        "produce",
        "--bootstrap",
        broker.bootstrap,
        "--topic",
        topic,
        "--input",
        str(SAMPLE),
        "--key-field",
        "store",
    )
    assert produced.stdout.strip() == f"produced 3000 records to {topic}"

    worker = start_worker(
        "reference",
        "--bootstrap",
        broker.bootstrap,
        "--config",
        str(config),
        "--state-dir",
        str(tmp_path / "state"),
        "--redis",
        redis_server.url,
        "--group",
        group,
        log=tmp_path / "worker.log",
    )
    try:
        progress = wait_caught_up(broker.bootstrap, group, topic, timeout=90)
    finally:
        assert stop_worker(worker) == 0, (tmp_path / "worker.log").read_text()
    assert sum(p.high for p in progress) == 3000
    assert sum(1 for p in progress if p.high > 0) > 1  # the keys really spread over partitions

    expected = replay_result(config, SAMPLE)
    assert expected["events"] == 3000 and expected["rejected"] == 0
    assert published_results(redis_server.url, out_topic) == expected["result"]

    # One key on its own through --key, with the offsets its result reflects.
    one = json.loads(
        ivm(
            "results", "reference", "--redis", redis_server.url, "--config", str(config), "--key", "north"
        ).stdout
    )
    assert one["result"] == expected["result"]["north"]
    [(tp, offset)] = one["offsets"].items()
    assert tp.startswith(f"{topic}:") and offset > 0
