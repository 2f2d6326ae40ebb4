"""User mistakes end in one readable line and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SAMPLE, ivm, ivm_produce, run_args, stream_config, write_config

from ivmstream.dev.redis_server import free_port
from ivmstream.events import FORMATS


def one_line_error(proc) -> str:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ivmstream: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def error_of(*args: str) -> str:
    """The one line ``ivmstream ARGS`` fails with (see ``one_line_error``)."""
    return one_line_error(ivm(*args, check=False))


def replay_error(config: Path | str, input_path: Path | str, *extra: str, service: str = "reference") -> str:
    """The one line ``ivmstream replay`` of ``input_path`` under ``config`` fails with."""
    return error_of("replay", service, "--config", str(config), "--input", str(input_path), *extra)


def test_missing_input_file(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = replay_error(cfg, "/nonexistent.jsonl")
    assert "input file not found: /nonexistent.jsonl" in line


def test_missing_config_file():
    line = replay_error("/nope.yaml", SAMPLE)
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
    line = replay_error(cfg, SAMPLE)
    assert needle in line


def test_unparseable_yaml(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("key_field: [unclosed\n")
    assert "not valid YAML" in replay_error(cfg, SAMPLE)


def test_unknown_service(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = replay_error(cfg, SAMPLE, service="nosuch")
    assert "unknown service 'nosuch'" in line and "reference" in line


def test_unreachable_broker(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    port = free_port()
    line = error_of("run", *run_args("reference", f"127.0.0.1:{port}", cfg, state_dir=tmp_path / "s"))
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in line
    line = one_line_error(ivm_produce(f"127.0.0.1:{port}", "x", SAMPLE, check=False))
    assert "cannot reach Kafka" in line


def test_unreachable_redis(tmp_path, broker):
    cfg = write_config(tmp_path / "c.json")
    port = free_port()
    line = error_of("run", *run_args("reference", broker.bootstrap, cfg, redis=f"redis://127.0.0.1:{port}/0"))
    assert f"cannot reach Redis at redis://127.0.0.1:{port}/0" in line
    line = error_of("results", "reference", "--redis", f"redis://127.0.0.1:{port}/0")
    assert "cannot reach Redis" in line


def test_results_before_anything_was_published(redis_server, unique):
    line = error_of("results", "reference", "--redis", redis_server.url, "--topic", f"{unique}.results")
    assert "no results published yet" in line


def test_bad_replay_every(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = replay_error(cfg, SAMPLE, "--every", "0")
    assert "--every" in line


def test_unknown_gc_policy(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    line = error_of("run", "reference", "--bootstrap", "127.0.0.1:1", "--config", str(cfg), "--gc", "off")
    assert "--gc" in line and "worker" in line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["run"], "the following arguments are required: SERVICE, --bootstrap"),
        (["produce", "--topic", "t", "--input", "x"], "--bootstrap"),
        (["run", "reference", "--bootstrap", "b", "--config", "c", "--state-backend", "disk"], "disk"),
    ],
)
def test_usage_mistakes_are_one_line_naming_the_help(argv, needle):
    line = error_of(*argv)
    assert needle in line and "--help)" in line


def test_bootstrap_argument_errors(tmp_path):
    cfg = write_config(tmp_path / "c.json")
    bootstrap = ["bootstrap", "reference", "--config", str(cfg), "--snapshot", str(SAMPLE)]
    line = error_of(*bootstrap, "--from-offsets", "0:5")
    assert "--from-offsets needs --bootstrap" in line
    line = error_of(*bootstrap, "--state-dir", str(tmp_path), "--redis", "redis://127.0.0.1:1/0")
    assert "not both" in line


def test_truncated_history_stops_the_worker_instead_of_skipping(broker, unique, tmp_path):
    """The embedded broker keeps ~5 MiB per partition and drops older records, like Kafka retention:
    a view started past deleted records would be silently wrong, so the worker refuses to start."""
    from confluent_kafka import Consumer, TopicPartition

    from ivmstream.events import SourceRecord
    from ivmstream.runtime.produce import produce_records

    topic = f"{unique}.updates"
    broker.create_topic(topic, 1)
    filler = b'{"relation":"items","row":{"item":"' + b"x" * 2000 + b'","qty":1,"price":"1"},"delta":1}'
    produce_records(broker.bootstrap, topic, [SourceRecord(i, filler) for i in range(4000)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert low > 0 and high == 4000  # the broker really dropped the oldest records
    cfg = stream_config(tmp_path / "c.json", unique)
    run = run_args("reference", broker.bootstrap, cfg, group=f"{unique}-g", state_dir=tmp_path / "s")
    line = error_of("run", *run)
    assert f"{topic}:0 starts at offset {low}, but the state needs offset 0" in line


# --- input formats and read options --------------------------------------------------------------------

BOOK = Path(__file__).resolve().parents[2] / "services" / "vwap" / "data" / "finance-tiny.csv"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--format", "parquet"],
            f"unknown input format 'parquet' (known: {', '.join(FORMATS)})",
        ),
        (
            ["--format", "orderbook", "--read-option", "book=sells"],
            "format orderbook: read option 'book' must be one of auto, bids, asks, both (got 'sells')",
        ),
        (
            ["--format", "orderbook", "--book", "sells"],  # the old flag is an alias: the same check
            "format orderbook: read option 'book' must be one of auto, bids, asks, both (got 'sells')",
        ),
        (
            ["--format", "orderbook", "--brokers", "ten"],
            "format orderbook: read option 'brokers' must be a positive integer (got 'ten')",
        ),
        (
            ["--format", "orderbook", "--read-option", "bok=bids"],
            "format orderbook: unknown read option 'bok' (options: book, brokers)",
        ),
        (
            ["--format", "csv", "--relation", "bids", "--book", "bids"],
            "format csv: unknown read option 'book' (options: delimiter, columns, delta_column)",
        ),
        (["--format", "orderbook", "--read-option", "book"], "--read-option expects KEY=VALUE, got 'book'"),
        (
            ["--format", "orderbook", "--book", "asks", "--read-option", "book=bids"],
            "--book asks and --read-option book=bids disagree",
        ),
        (
            ["--format", "tbl"],
            f"{BOOK}: its name names none of the relations of vwap (bids, asks): pass --input "
            f"{BOOK}:RELATION",
        ),
    ],
)
def test_format_and_read_option_mistakes_are_one_line(tmp_path, extra, message):
    cfg = write_config(tmp_path / "c.json", query="psp")
    line = replay_error(cfg, BOOK, *extra, service="vwap")
    assert line == f"ivmstream: error: {message}"


def test_produce_of_tbl_without_a_service_asks_for_columns(tmp_path):
    tbl = tmp_path / "items.tbl"
    tbl.write_text("fig|1|2\n")
    produce = ["produce", "--bootstrap", "127.0.0.1:1", "--input", str(tbl)]
    line = error_of(*produce, "--topic", "t")
    assert "format tbl needs the columns of 'items': pass --read-option columns=a,b,c" in line
    assert "produce needs --topic" in error_of(*produce)
    assert "--config needs --service" in error_of(*produce, "--config", str(tmp_path / "c.json"))
