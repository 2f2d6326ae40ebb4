"""The ``ivmkafka`` Spark data source reads exactly the offset ranges asked for, like a plain consumer;
the Kafka security settings reach it and every other Kafka reader of the Spark jobs."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import AnalysisException

from ivmstream.config import ServiceConfig, load_config
from ivmstream.events import SourceRecord
from ivmstream.runtime.dlq import latest_results, read_dead_letters, read_to_end
from ivmstream.runtime.kafka import BrokerUnavailable
from ivmstream.runtime.produce import produce_records
from ivmstream.service import load_service
from ivmstream.spark.kafka_source import (
    KAFKA_SCHEMA,
    KafkaPartition,
    KafkaSource,
    read_kafka,
    resolve_offsets,
)
from tests.helpers import ivm, read_topic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ivmstream.dev.broker import BrokerProcess

pytestmark = [pytest.mark.spark, pytest.mark.timeout(180)]

N_RECORDS = 500
N_TOMBSTONES = 2


def _source(broker: BrokerProcess, spark: SparkSession, topic: str, **options: str) -> DataFrame:
    reader = (
        spark.read.format("ivmkafka").option("bootstrap.servers", broker.bootstrap).option("topic", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _rows(df: DataFrame) -> Counter[tuple[Any, ...]]:
    return Counter((r.key, r.value, r.partition, r.offset) for r in df.collect())


@pytest.fixture(scope="module")
def topic(broker: BrokerProcess) -> str:
    """3 partitions: 500 records, every 10th without a key (those go to partition 0), 2 null values."""
    name = f"spark-src-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, 3)
    records = [
        SourceRecord(i, json.dumps({"i": i}).encode(), None if i % 10 == 0 else f"key-{i % 37}".encode())
        for i in range(N_RECORDS)
    ]
    report = produce_records(broker.bootstrap, name, records)
    assert report.sent == N_RECORDS and not report.failures
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(N_TOMBSTONES):
        producer.produce(name, value=None, key=f"gone-{i}".encode(), partition=1)
    assert producer.flush(10) == 0
    return name


@pytest.fixture(scope="module")
def reference(broker: BrokerProcess, topic: str) -> list[Any]:
    return read_topic(broker.bootstrap, topic, expect=N_RECORDS + N_TOMBSTONES)


def test_default_offsets_read_what_a_consumer_reads(
    spark: SparkSession, broker: BrokerProcess, topic: str, reference: list[Any]
) -> None:
    df = _source(broker, spark, topic)
    assert df.schema.simpleString() == KAFKA_SCHEMA.simpleString()
    expected = Counter((m.key(), m.value(), m.partition(), m.offset()) for m in reference)
    assert len({p for _, _, p, _ in expected}) == 3, "the keys should spread over all partitions"
    assert _rows(df) == expected
    assert df.rdd.getNumPartitions() == 3

    # The other columns: topic name, and the record timestamp to the millisecond (UTC, as epoch ms).
    extra = df.selectExpr("topic", "partition", "offset", "unix_millis(timestamp) AS ms").collect()
    assert {r.topic for r in extra} == {topic}
    assert {(r.partition, r.offset): r.ms for r in extra} == {
        (m.partition(), m.offset()): m.timestamp()[1] for m in reference
    }
    assert df.where("key IS NULL").count() == sum(1 for m in reference if m.key() is None) > 0
    assert df.where("value IS NULL").count() == N_TOMBSTONES


def test_explicit_json_offsets_give_exact_ranges(
    spark: SparkSession, broker: BrokerProcess, topic: str, reference: list[Any]
) -> None:
    high = {p: hi for p, (_, hi) in resolve_offsets(broker.bootstrap, topic).items()}
    assert all(h >= 30 for h in high.values()), high
    starting, ending = {"0": 10, "2": 5}, {"0": 20, "1": 7}
    want = {0: (10, 20), 1: (0, 7), 2: (5, high[2])}  # unnamed: earliest / latest
    assert resolve_offsets(broker.bootstrap, topic, json.dumps(starting), json.dumps(ending)) == want

    df = _source(broker, spark, topic, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    expected = Counter(
        (m.key(), m.value(), m.partition(), m.offset())
        for m in reference
        if want[m.partition()][0] <= m.offset() < want[m.partition()][1]
    )
    assert _rows(df) == expected
    assert sum(expected.values()) == 10 + 7 + (high[2] - 5)

    # Spark's Kafka-source forms: {"topic": {...}}, -2 earliest, -1 latest; beyond the end clamps.
    spark_form = _source(
        broker,
        spark,
        topic,
        startingOffsets=json.dumps({topic: {"0": -2, "1": 3, "2": 10**9}}),
        endingOffsets=json.dumps({topic: {"0": 4, "1": -1}}),
    )
    got = Counter((p, o) for _, _, p, o in _rows(spark_form).elements())
    assert got == Counter([(0, o) for o in range(4)] + [(1, o) for o in range(3, high[1])])

    # read_kafka with a mapping, as a job that recorded where it stopped would call it.
    assert read_kafka(spark, broker.bootstrap, topic, {0: 15}, {0: 18, 1: 0, 2: 0}).count() == 3


def test_latest_start_reads_nothing(spark: SparkSession, broker: BrokerProcess, topic: str) -> None:
    df = _source(broker, spark, topic, startingOffsets="latest")
    assert df.count() == 0
    assert df.collect() == []
    source = KafkaSource({"bootstrap.servers": broker.bootstrap, "topic": topic, "startingOffsets": "latest"})
    assert source.reader(KAFKA_SCHEMA).partitions() == []


def test_empty_ranges_make_no_spark_partitions(
    spark: SparkSession, broker: BrokerProcess, topic: str, unique: str
) -> None:
    sparse = f"{unique}-sparse"
    broker.create_topic(sparse, 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce(sparse, value=f"v{i}".encode(), partition=(0, 2)[i % 2])
    assert producer.flush(10) == 0

    df = _source(broker, spark, sparse)
    assert df.rdd.getNumPartitions() == 2
    assert Counter(r.partition for r in df.collect()) == {0: 10, 2: 10}
    parts = (
        KafkaSource({"bootstrap.servers": broker.bootstrap, "topic": sparse})
        .reader(KAFKA_SCHEMA)
        .partitions()
    )
    assert [(p.partition, p.start, p.end) for p in parts if isinstance(p, KafkaPartition)] == [
        (0, 0, 10),
        (2, 0, 10),
    ]

    # An explicit range that is empty (start == end) on a non-empty partition also makes no task.
    narrowed = _source(broker, spark, topic, startingOffsets='{"1": 5}', endingOffsets='{"1": 5}')
    assert narrowed.rdd.getNumPartitions() == 2
    assert narrowed.where("partition = 1").count() == 0


def test_transaction_markers_are_skipped(spark: SparkSession, broker: BrokerProcess, unique: str) -> None:
    txn_topic = f"{unique}-txn"
    broker.create_topic(txn_topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{unique}-tx"})
    producer.init_transactions(10)
    for batch in range(3):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(txn_topic, value=f"{batch}-{i}".encode(), partition=0)
        producer.commit_transaction(10)
    (start, end) = resolve_offsets(broker.bootstrap, txn_topic)[0]
    assert (start, end) == (0, 15)  # 12 records + 3 commit markers, the last one at the very end
    df = _source(broker, spark, txn_topic)
    assert sorted(r.offset for r in df.collect()) == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13]
    assert (
        _source(broker, spark, txn_topic, startingOffsets='{"0": 4}', endingOffsets='{"0": 6}').count() == 1
    )


def test_read_kafka_pins_offsets(spark: SparkSession, broker: BrokerProcess, unique: str) -> None:
    growing = f"{unique}-growing"
    broker.create_topic(growing, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(growing, value=b"x", partition=i % 2)
    assert producer.flush(10) == 0
    pinned = read_kafka(spark, broker.bootstrap, growing)
    live = _source(broker, spark, growing)
    for i in range(6):
        producer.produce(growing, value=b"y", partition=i % 2)
    assert producer.flush(10) == 0
    assert pinned.count() == 10  # resolved when read_kafka was called
    assert live.count() == 16  # "latest" resolved when this query was planned


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topic": None}, "topic"),
        ({"bootstrap.servers": None}, "bootstrap.servers"),
        ({"startingOffsets": "{not json"}, "startingOffsets"),
        ({"endingOffsets": '{"0": "ten"}'}, "endingOffsets"),
        ({"startingOffsets": '["0", 1]'}, "startingOffsets"),
        ({"startingOffset": "earliest"}, "startingoffset"),
        ({"kafkaConsumer.pollTimeoutMs": "soon"}, "kafkaConsumer.pollTimeoutMs"),
    ],
)
def test_bad_option_names_the_option(
    spark: SparkSession, broker: BrokerProcess, topic: str, options: dict[str, str | None], named: str
) -> None:
    merged: dict[str, str | None] = {"bootstrap.servers": broker.bootstrap, "topic": topic, **options}
    reader = spark.read.format("ivmkafka")
    for name, value in merged.items():
        if value is not None:
            reader = reader.option(name, value)
    with pytest.raises(AnalysisException, match=f"option.*'{named}'|'{named}'.*option") as info:
        reader.load().collect()
    assert named in str(info.value)


def test_partition_not_in_topic_is_an_error(spark: SparkSession, broker: BrokerProcess, topic: str) -> None:
    df = _source(broker, spark, topic, endingOffsets='{"7": 3}')
    with pytest.raises(AnalysisException, match="endingOffsets") as info:
        df.collect()
    assert "has partitions 0..2" in str(info.value)


# --------------------------------------------------------------------------- security settings

KEY_PASSWORD = "key-pass-Planted-5e71"
SASL_PASSWORD = "sasl-pass-Planted-0c94"


def _absent_ca(tmp_path: Path) -> str:
    """TLS settings whose CA file is missing: librdkafka refuses them when it builds a client, naming
    ``ssl.ca.location``, which proves they reached it (the embedded broker has no TLS listener)."""
    return str(tmp_path / "absent-ca.pem")


def _tls_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("IVMSTREAM_KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("IVMSTREAM_KAFKA_SSL_CA_LOCATION", _absent_ca(tmp_path))
    monkeypatch.setenv("IVMSTREAM_KAFKA_SSL_KEY_PASSWORD", KEY_PASSWORD)


def _config(tmp_path: Path, unique: str, consumer: dict[str, Any]) -> ServiceConfig:
    path = tmp_path / "reference.json"
    path.write_text(
        json.dumps(
            {
                "key_field": "store",
                "input_topic": f"{unique}.updates",
                "output_topic": f"{unique}.results",
                "dlq_topic": f"{unique}.dlq",
                "kafka": {"consumer": consumer},
            }
        )
    )
    return load_config(load_service("reference"), path)


def test_security_settings_reach_the_dead_letter_and_results_readers(
    broker: BrokerProcess, topic: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the environment, or from a config's ``kafka.consumer`` section, into the consumers that read
    dead letters and published results back (reconcile uses them): each refuses the missing CA file in
    one line that names the topic, and no password shows."""
    from_config = {"security.protocol": "SSL", "ssl.ca.location": _absent_ca(tmp_path)}
    from_config_secret = from_config | {"sasl.password": SASL_PASSWORD}
    results = partial(latest_results, broker.bootstrap, topic)
    dead = partial(read_dead_letters, broker.bootstrap, topic)
    _refused(partial(results, kafka=from_config), topic, broker, SASL_PASSWORD)
    _refused(partial(dead, kafka=from_config_secret), topic, broker, SASL_PASSWORD)
    _tls_env(monkeypatch, tmp_path)
    _refused(results, topic, broker, KEY_PASSWORD)
    _refused(dead, topic, broker, KEY_PASSWORD)
    # the config's section goes on top of the environment's settings
    assert read_to_end(broker.bootstrap, topic, kafka={"security.protocol": "PLAINTEXT"})


def _refused(read: Callable[[], object], topic: str, broker: BrokerProcess, secret: str) -> None:
    with pytest.raises(BrokerUnavailable) as refused:
        read()
    text = str(refused.value)
    assert f"cannot read {topic} at {broker.bootstrap}" in text and "ssl.ca.location" in text, text
    assert secret not in text


def test_kafka_options_reach_the_planner_and_every_task_consumer(
    broker: BrokerProcess, topic: str, tmp_path: Path
) -> None:
    """``kafka.*`` options go to the consumer that plans the read (in the driver) and to the one each
    task builds (in an executor, from the pickled reader); their errors mask the passwords."""
    options = {
        "bootstrap.servers": broker.bootstrap,
        "topic": topic,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.ca.location": _absent_ca(tmp_path),
        "kafka.sasl.password": SASL_PASSWORD,
    }
    reader = KafkaSource(options).reader(KAFKA_SCHEMA)
    with pytest.raises(ValueError, match=r"ssl\.ca\.location") as planner:
        reader.partitions()
    with pytest.raises(ValueError, match=r"ssl\.ca\.location") as task:
        list(reader.read(KafkaPartition(0, 0, 1)))
    for refused in (planner, task):
        assert SASL_PASSWORD not in str(refused.value)


def test_reconcile_gives_every_kafka_reader_the_security_settings(
    broker: BrokerProcess, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment's settings and the config's ``kafka.consumer`` section reach, in the order
    reconcile uses them, the results reader, the offsets resolver and the Spark source; each failure is
    one line (an error the CLI reports) without the password."""
    from ivmstream.spark import jobs

    _tls_env(monkeypatch, tmp_path)
    config = _config(tmp_path, unique, {"sasl.username": "ivm", "enable.ssl.certificate.verification": False})
    settings = jobs.kafka_settings(config)
    assert settings["security.protocol"] == "SSL" and settings["sasl.username"] == "ivm"
    assert settings["enable.ssl.certificate.verification"] == "false"  # librdkafka's spelling
    broker.create_topic(config.input_topic, 1)
    service = load_service("reference")
    # no Spark session: each reader fails before reconcile would use one
    reconcile = partial(jobs.reconcile_topic, None, service, config, broker.bootstrap, None)
    with pytest.raises(BrokerUnavailable, match=r"ssl\.ca\.location"):  # the results topic, read back
        reconcile()
    published = {"k": {"key": "k", "result": {}, "offsets": {f"{config.input_topic}:0": 0}}}
    monkeypatch.setattr(jobs, "latest_results", lambda *_a, **_k: published)
    with pytest.raises(jobs.BatchError, match=r"ssl\.ca\.location") as offsets:  # the offsets resolver
        reconcile()
    monkeypatch.setattr(jobs, "topic_offsets", lambda *_a, **_k: {0: 0})
    with pytest.raises(ValueError, match=r"ssl\.ca\.location") as source:  # the Spark source's planner
        reconcile()
    for refused in (offsets, source):
        assert KEY_PASSWORD not in str(refused.value)


def test_secret_kafka_options_stay_out_of_spark_plans(
    spark: SparkSession, broker: BrokerProcess, topic: str
) -> None:
    """Passwords among the ``kafka.*`` options (harmless over PLAINTEXT) read the whole topic and never
    show in the query's plans."""
    options = {"kafka.security.protocol": "PLAINTEXT", "kafka.sasl.password": SASL_PASSWORD}
    df = read_kafka(spark, broker.bootstrap, topic, options=options)
    assert df.count() == N_RECORDS + N_TOMBSTONES
    plans = io.StringIO()
    with contextlib.redirect_stdout(plans):
        df.explain(extended=True)
    assert "ivmkafka" in plans.getvalue() and SASL_PASSWORD not in plans.getvalue()


@pytest.mark.parametrize("command", ["reconcile", "bootstrap"])
def test_the_jobs_commands_check_kafka_with_the_configs_settings(
    broker: BrokerProcess, unique: str, tmp_path: Path, command: str
) -> None:
    """``ivmstream reconcile``/``bootstrap`` probe the broker with the config's ``kafka.consumer`` section
    before starting Spark: a refused setting is one line, without the password beside it."""
    consumer = {
        "security.protocol": "SSL",
        "ssl.ca.location": _absent_ca(tmp_path),
        "sasl.password": SASL_PASSWORD,
    }
    config = _config(tmp_path, unique, consumer)
    args = [command, "reference", "--config", str(config.source), "--bootstrap", broker.bootstrap]
    if command == "bootstrap":
        args += ["--snapshot", str(tmp_path / "snapshot"), "--state-dir", str(tmp_path / "state")]
    proc = ivm(*args, check=False, timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"ivmstream: error: cannot reach Kafka at {broker.bootstrap}: ")
    assert "ssl.ca.location" in proc.stderr and SASL_PASSWORD not in proc.stderr + proc.stdout
