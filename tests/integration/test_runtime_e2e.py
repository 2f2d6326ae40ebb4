"""produce -> run -> results through the real CLI, broker process and redis-server, vs. replay."""

from __future__ import annotations

import json

from helpers import (
    SAMPLE,
    catch_up_with_workers,
    ivm,
    ivm_produce,
    published_results,
    replay_result,
    stream_config,
    worker_args,
)


def test_produce_run_results_equal_replay(broker, redis_server, unique, tmp_path):
    topic, out_topic = f"{unique}.updates", f"{unique}.results"
    broker.create_topic(topic, 3)
    config = stream_config(tmp_path / "ref.json", unique, key_field="store", checkpoint_interval=0.2)

    produced = ivm_produce(broker.bootstrap, topic, SAMPLE, key_field="store")
    assert produced.stdout.strip() == f"produced 3000 records to {topic}"

    args = worker_args("reference", broker, redis_server, unique, tmp_path, config)
    progress = catch_up_with_workers(args, broker, unique, tmp_path, timeout=90)
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
