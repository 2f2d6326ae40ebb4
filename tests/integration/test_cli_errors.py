"""User mistakes end in one readable line and a non-zero exit, never a traceback."""

from __future__ import annotations

import pytest
from helpers import SAMPLE, ivm, write_config

from shared.redis_server import free_port


def one_line_error(proc) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ivmstream: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_missing_input_file(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = one_line_error(
        ivm("replay", "reference", "--config", str(cfg), "--input", "/nonexistent.jsonl", check=False)
    )
    assert "input file not found: /nonexistent.jsonl" in line


def test_missing_config_file():
    line = one_line_error(
        ivm("replay", "reference", "--config", "/nope.yaml", "--input", str(SAMPLE), check=False)
    )
    assert "config file not found" in line


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"bogus": 1}, "unknown config key 'bogus'"),
        ({"batch_size": 0}, "'batch_size' must be a positive integer"),
        ({"relations": {"r": {"c": "blob"}}}, "unknown type 'blob'"),
        ({"input_topic": "bad topic!"}, "'input_topic' must be a Kafka topic name"),
    ],
)
def test_bad_config_values(tmp_path, config, needle):
    cfg = write_config(tmp_path / "c.json", **config)
    line = one_line_error(
        ivm("replay", "reference", "--config", str(cfg), "--input", str(SAMPLE), check=False)
    )
    assert needle in line


def test_unparseable_yaml(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("key_field: [unclosed\n")
    assert "not valid YAML" in one_line_error(
        ivm("replay", "reference", "--config", str(cfg), "--input", str(SAMPLE), check=False)
    )


def test_unknown_service(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = one_line_error(ivm("replay", "nosuch", "--config", str(cfg), "--input", str(SAMPLE), check=False))
    assert "unknown service 'nosuch'" in line and "reference" in line


def test_unreachable_broker(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    port = free_port()
    line = one_line_error(
        ivm(
            "run",
            "reference",
            "--bootstrap",
            f"127.0.0.1:{port}",
            "--config",
            str(cfg),
            "--state-dir",
            str(tmp_path / "s"),
            check=False,
        )
    )
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in line
    line = one_line_error(
        ivm(
            "produce", "--bootstrap", f"127.0.0.1:{port}", "--topic", "x", "--input", str(SAMPLE), check=False
        )
    )
    assert "cannot reach Kafka" in line


def test_unreachable_redis(tmp_path, broker):
    cfg = write_config(tmp_path / "c.json")
    port = free_port()
    line = one_line_error(
        ivm(
            "run",
            "reference",
            "--bootstrap",
            broker.bootstrap,
            "--config",
            str(cfg),
            "--redis",
            f"redis://127.0.0.1:{port}/0",
            check=False,
        )
    )
    assert f"cannot reach Redis at redis://127.0.0.1:{port}/0" in line
    line = one_line_error(ivm("results", "reference", "--redis", f"redis://127.0.0.1:{port}/0", check=False))
    assert "cannot reach Redis" in line


def test_results_before_anything_was_published(redis_server, unique):
    line = one_line_error(
        ivm("results", "reference", "--redis", redis_server.url, "--topic", f"{unique}.results", check=False)
    )
    assert "no results published yet" in line


def test_bad_replay_every(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = one_line_error(
        ivm("replay", "reference", "--config", str(cfg), "--input", str(SAMPLE), "--every", "0", check=False)
    )
    assert "--every" in line


def test_bootstrap_argument_errors(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = one_line_error(
        ivm(
            "bootstrap",
            "reference",
            "--config",
            str(cfg),
            "--snapshot",
            str(SAMPLE),
            "--from-offsets",
            "0:5",
            check=False,
        )
    )
    assert "--from-offsets needs --bootstrap" in line
    line = one_line_error(
        ivm(
            "bootstrap",
            "reference",
            "--config",
            str(cfg),
            "--snapshot",
            str(SAMPLE),
            "--state-dir",
            str(tmp_path),
            "--redis",
            "redis://127.0.0.1:1/0",
            check=False,
        )
    )
    assert "not both" in line


def test_truncated_history_stops_the_worker_instead_of_skipping(broker, unique, tmp_path):
    """The embedded broker keeps ~5 MiB per partition and drops older records, like Kafka retention:
    a view started past deleted records would be silently wrong, so the worker refuses to start."""
    from confluent_kafka import Consumer, TopicPartition

    from shared.events import SourceRecord
    from shared.runtime.produce import produce_records

    topic = f"{unique}.updates"
    broker.create_topic(topic, 1)
    filler = b'{"relation":"items","row":{"item":"' + b"x" * 2000 + b'","qty":1,"price":"1"},"delta":1}'
    produce_records(broker.bootstrap, topic, [SourceRecord(i, filler) for i in range(4000)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert low > 0 and high == 4000  # the broker really dropped the oldest records
    cfg = write_config(
        tmp_path / "c.json", input_topic=topic, output_topic=f"{unique}.results", dlq_topic=f"{unique}.dlq"
    )
    line = one_line_error(
        ivm(
            "run",
            "reference",
            "--bootstrap",
            broker.bootstrap,
            "--config",
            str(cfg),
            "--state-dir",
            str(tmp_path / "s"),
            "--group",
            f"{unique}-g",
            check=False,
        )
    )
    assert f"{topic}:0 starts at offset {low}, but the state needs offset 0" in line
