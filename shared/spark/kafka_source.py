"""``ivmkafka``: a PySpark Python Data Source reading a Kafka topic's offset ranges in batch.

The JVM Kafka connector is not available here, so the reader uses confluent-kafka. The planner lists
the topic's partitions and resolves ``startingOffsets``/``endingOffsets`` against each partition's
watermarks (``resolve_offsets``); every partition with a non-empty ``[start, end)`` range becomes one
Spark task, which assigns a Consumer to it and yields Arrow record batches until its position reaches
``end``. Offsets missing inside a range (transaction markers, aborted or compacted records) are skipped.

Options (names are case-insensitive, as for every Spark source)::

    bootstrap.servers          required
    topic                      required, one topic
    startingOffsets            earliest (default) | latest | JSON {"<partition>": offset, ...}
    endingOffsets              latest (default)   | earliest | JSON {"<partition>": offset, ...}
    kafkaConsumer.pollTimeoutMs  how long a task or the planner waits for the broker (default 60000)
    kafka.<librdkafka setting>   passed to every Consumer, e.g. kafka.security.protocol; secret ones
                                 (kafka.sasl.password) are masked in every error and log line

In JSON offsets -2 means earliest and -1 latest (as in Spark's Kafka source, whose
``{"<topic>": {...}}`` form is accepted too); partitions not named start at earliest and end at latest.
Offsets are clamped to the partition's ``[low, high]`` watermarks; a start at or past the end is an
empty range. ``isolation.level`` is librdkafka's default, read_committed. The reader owns
``bootstrap.servers``, ``enable.auto.commit``, ``enable.partition.eof`` and ``auto.offset.reset`` (error:
a range deleted by retention since planning fails the task); ``kafka.*`` cannot override those.

Spark plans a query on the frame (and so resolves ``earliest``/``latest``) again for each action that
makes a new plan, e.g. ``count()`` after ``collect()``; ``read_kafka`` pins the offsets at call time.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ivmstream.secrets import redact, register_kafka_settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "FORMAT",
    "KAFKA_SCHEMA",
    "KafkaPartition",
    "KafkaReader",
    "KafkaSource",
    "KafkaSourceError",
    "offsets_json",
    "parse_offsets",
    "read_kafka",
    "resolve_offsets",
]

FORMAT = "ivmkafka"
EARLIEST, LATEST = -2, -1  # sentinels inside JSON offsets, as in Spark's Kafka source
DEFAULT_TIMEOUT_MS = 60_000
BATCH_ROWS = 10_000  # rows per Arrow batch handed to Spark (Spark's own default maxRecordsPerBatch)

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)

_OPT_BOOTSTRAP = "bootstrap.servers"
_OPT_TOPIC = "topic"
_OPT_START = "startingOffsets"
_OPT_END = "endingOffsets"
_OPT_TIMEOUT = "kafkaConsumer.pollTimeoutMs"
_KAFKA_PREFIX = "kafka."
_KNOWN = {o.lower(): o for o in (_OPT_BOOTSTRAP, _OPT_TOPIC, _OPT_START, _OPT_END, _OPT_TIMEOUT)}
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")

OffsetSpec = str | dict[int, int]  # "earliest" | "latest" | {partition: offset or EARLIEST/LATEST}


class KafkaSourceError(RuntimeError):
    """The broker could not answer, or a range could not be read completely."""


# --------------------------------------------------------------------------- options


def parse_offsets(
    value: str | Mapping[Any, Any], option: str = _OPT_START, topic: str | None = None
) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON (or a mapping) of partition -> offset; ValueError names ``option``."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("earliest", "latest"):
            return text.lower()
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise ValueError(
                f"option {option!r}: expected 'earliest', 'latest' or a JSON object "
                f'{{"<partition>": offset}}, got {value!r} ({exc})'
            ) from None
    else:
        parsed = dict(value)
    if not isinstance(parsed, dict):
        raise ValueError(
            f'option {option!r}: expected a JSON object {{"<partition>": offset}}, got {value!r}'
        )
    # Spark's Kafka source form: {"<topic>": {"<partition>": offset}}.
    if len(parsed) == 1 and isinstance(next(iter(parsed.values())), dict):
        ((named, inner),) = parsed.items()
        if topic is not None and named != topic:
            raise ValueError(f"option {option!r}: names topic {named!r}, but the topic read is {topic!r}")
        parsed = inner
    offsets: dict[int, int] = {}
    for raw_partition, raw_offset in parsed.items():
        try:
            partition = int(raw_partition)
        except (TypeError, ValueError):
            partition = -1
        if partition < 0 or isinstance(raw_partition, bool | float):
            raise ValueError(f"option {option!r}: partition {raw_partition!r} is not a non-negative integer")
        if isinstance(raw_offset, bool) or not isinstance(raw_offset, int) or raw_offset < EARLIEST:
            raise ValueError(
                f"option {option!r}: offset for partition {partition} must be an integer >= 0 "
                f"(or -2 earliest, -1 latest), got {raw_offset!r}"
            )
        offsets[partition] = raw_offset
    return offsets


def offsets_json(offsets: OffsetSpec | Mapping[int, int]) -> str:
    """The option string for an offset spec: ``earliest``/``latest`` as is, a mapping as JSON."""
    if isinstance(offsets, str):
        return offsets
    return json.dumps({str(int(p)): int(o) for p, o in sorted(offsets.items())})


def _consumer_conf(bootstrap: str, extra: Mapping[str, str] | None) -> dict[str, Any]:
    """``extra`` (the ``kafka.*`` options) under the reader's own settings; secrets among them are
    registered for redaction in this process, the driver's or an executor's, before any client exists."""
    register_kafka_settings(extra or {})
    conf: dict[str, Any] = {"group.id": f"ivmkafka-{uuid.uuid4().hex}"}
    conf.update(extra or {})
    conf.update(
        {
            "bootstrap.servers": bootstrap,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # A start offset gone since planning (retention) is data loss: fail, never jump silently.
            "auto.offset.reset": "error",
        }
    )
    return conf


def _new_consumer(conf: Mapping[str, Any]) -> Any:
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(dict(conf))
    except (KafkaException, ValueError, TypeError) as exc:
        raise ValueError(
            f"invalid '{_KAFKA_PREFIX}*' option for the Kafka consumer: {redact(str(exc))}"
        ) from None


# --------------------------------------------------------------------------- offsets


def _pick(spec: OffsetSpec, partition: int, low: int, high: int, default: int) -> int:
    if isinstance(spec, str):
        wanted = low if spec == "earliest" else high
    else:
        wanted = spec.get(partition, default)
        wanted = low if wanted == EARLIEST else high if wanted == LATEST else wanted
    return min(max(wanted, low), high)


def _resolve_with(
    consumer: Any, bootstrap: str, topic: str, starting: OffsetSpec, ending: OffsetSpec, timeout: float
) -> dict[int, tuple[int, int]]:
    from confluent_kafka import KafkaException, TopicPartition

    try:
        metadata = consumer.list_topics(timeout=timeout)  # all topics: naming one could auto-create it
    except KafkaException as exc:
        raise KafkaSourceError(f"cannot reach Kafka at {bootstrap}: {redact(exc.args[0].str())}") from None
    meta = metadata.topics.get(topic)
    if meta is None or not meta.partitions:
        raise KafkaSourceError(f"topic {topic!r} does not exist at {bootstrap}")
    if meta.error is not None:
        raise KafkaSourceError(f"topic {topic!r} at {bootstrap}: {meta.error.str()}")
    partitions = sorted(meta.partitions)
    for option, spec in ((_OPT_START, starting), (_OPT_END, ending)):
        if isinstance(spec, dict) and (unknown := sorted(set(spec) - set(partitions))):
            raise ValueError(
                f"option {option!r}: topic {topic!r} has partitions 0..{partitions[-1]}, "
                f"not {', '.join(map(str, unknown))}"
            )
    ranges: dict[int, tuple[int, int]] = {}
    for partition in partitions:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout, cached=False
            )
        except KafkaException as exc:
            raise KafkaSourceError(
                f"cannot get offsets of {topic}[{partition}] from {bootstrap}: {exc.args[0].str()}"
            ) from None
        start = _pick(starting, partition, low, high, default=low)
        end = _pick(ending, partition, low, high, default=high)
        ranges[partition] = (start, max(start, end))
    return ranges


def resolve_offsets(
    bootstrap: str,
    topic: str,
    starting: str | Mapping[int, int] = "earliest",
    ending: str | Mapping[int, int] = "latest",
    *,
    conf: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_MS / 1000,
) -> dict[int, tuple[int, int]]:
    """Every partition of ``topic`` -> its ``(start, end)`` range now, clamped to its watermarks.

    ``end`` is exclusive and ``start <= end``; an empty range has ``start == end``. ``conf`` holds extra
    librdkafka settings (security etc.). Raises ValueError for bad offsets, KafkaSourceError when the
    broker does not answer or the topic does not exist.
    """
    start_spec = parse_offsets(starting, _OPT_START, topic)
    end_spec = parse_offsets(ending, _OPT_END, topic)
    consumer = _new_consumer(_consumer_conf(bootstrap, conf))
    try:
        return _resolve_with(consumer, bootstrap, topic, start_spec, end_spec, timeout)
    finally:
        consumer.close()


# --------------------------------------------------------------------------- the data source


class KafkaPartition(InputPartition):
    """One Kafka partition's ``[start, end)`` range: one Spark task."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition = partition
        self.start = start
        self.end = end


class KafkaSource(DataSource):
    """``spark.read.format("ivmkafka")``; the options are validated here, when ``load()`` is called."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        unknown = sorted(k for k in opts if k not in _KNOWN and not k.startswith(_KAFKA_PREFIX))
        if unknown:
            raise ValueError(
                f"unknown option(s) {', '.join(map(repr, unknown))} for {FORMAT}; "
                f"known: {', '.join(_KNOWN.values())} and '{_KAFKA_PREFIX}<librdkafka setting>'"
            )
        bootstrap = opts.get(_OPT_BOOTSTRAP.lower(), "").strip()
        if not bootstrap:
            raise ValueError(f"option {_OPT_BOOTSTRAP!r} is required (host:port[,host:port...])")
        topic = opts.get(_OPT_TOPIC, "").strip()
        if not topic:
            raise ValueError(f"option {_OPT_TOPIC!r} is required (one topic name)")
        if not _TOPIC_RE.fullmatch(topic):
            raise ValueError(f"option {_OPT_TOPIC!r}: {topic!r} is not a valid Kafka topic name")
        raw_timeout = opts.get(_OPT_TIMEOUT.lower(), str(DEFAULT_TIMEOUT_MS))
        try:
            timeout_ms = int(raw_timeout)
        except ValueError:
            timeout_ms = 0
        if timeout_ms <= 0:
            raise ValueError(f"option {_OPT_TIMEOUT!r}: expected a positive integer, got {raw_timeout!r}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.starting = parse_offsets(opts.get(_OPT_START.lower(), "earliest"), _OPT_START, topic)
        self.ending = parse_offsets(opts.get(_OPT_END.lower(), "latest"), _OPT_END, topic)
        self.timeout = timeout_ms / 1000
        self.kafka_conf = {k[len(_KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(_KAFKA_PREFIX)}

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> KafkaReader:
        if schema.simpleString() != KAFKA_SCHEMA.simpleString():
            raise ValueError(
                f"{FORMAT} has a fixed schema {KAFKA_SCHEMA.simpleString()}, got {schema.simpleString()}"
            )
        return KafkaReader(
            self.bootstrap, self.topic, self.starting, self.ending, self.kafka_conf, self.timeout
        )


class KafkaReader(DataSourceReader):
    """Plans one task per non-empty partition range; ``read`` runs in the Python workers.

    Everything a task needs (bootstrap, topic, librdkafka settings, timeout) is a plain attribute of this
    object, which Spark pickles into the read function it ships to executors; the range itself travels
    in the task's KafkaPartition.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        starting: OffsetSpec,
        ending: OffsetSpec,
        kafka_conf: Mapping[str, str],
        timeout: float,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.starting = starting
        self.ending = ending
        self.kafka_conf = dict(kafka_conf)
        self.timeout = timeout

    def partitions(self) -> list[InputPartition]:
        consumer = _new_consumer(_consumer_conf(self.bootstrap, self.kafka_conf))
        try:
            ranges = _resolve_with(
                consumer, self.bootstrap, self.topic, self.starting, self.ending, self.timeout
            )
        finally:
            consumer.close()
        # Spark turns an empty list into one InputPartition(None) task; read() yields nothing for it.
        return [KafkaPartition(p, s, e) for p, (s, e) in sorted(ranges.items()) if e > s]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaPartition) or partition.end <= partition.start:
            return
        yield from _read_range(
            self.bootstrap,
            self.topic,
            partition.partition,
            partition.start,
            partition.end,
            self.kafka_conf,
            self.timeout,
        )


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def _read_range(
    bootstrap: str,
    topic: str,
    partition: int,
    start: int,
    end: int,
    kafka_conf: Mapping[str, str],
    timeout: float,
) -> Iterator[pa.RecordBatch]:
    """Yield every record of ``topic[partition]`` with ``start <= offset < end`` as Arrow batches."""
    import pyarrow as pa
    from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, KafkaError, TopicPartition

    schema = _arrow_schema()
    where = f"{topic}[{partition}] offsets [{start}, {end}) at {bootstrap}"
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    stamps: list[int | None] = []

    def batch() -> pa.RecordBatch:
        n = len(offsets)
        out = pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array([topic] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(stamps, pa.timestamp("us", tz="UTC")),
            ],
            schema=schema,
        )
        keys.clear(), values.clear(), offsets.clear(), stamps.clear()
        return out

    consumer = _new_consumer(_consumer_conf(bootstrap, kafka_conf))
    try:
        tp = TopicPartition(topic, partition, start)
        consumer.assign([tp])
        position = start
        deadline = time.monotonic() + timeout
        while position < end:
            wait = max(0.0, min(0.1, deadline - time.monotonic()))
            messages = consumer.consume(num_messages=min(BATCH_ROWS, end - position), timeout=wait)
            before = position
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # At the log end: offsets up to it that were never delivered are markers or
                        # aborted records. Below ``end`` the rest is not readable yet (open transaction).
                        position = max(position, min(msg.offset(), end))
                        continue
                    raise KafkaSourceError(f"reading {where}: {redact(err.str())}")
                offset = msg.offset()
                if offset >= end:
                    position = end
                    break
                if offset < position:
                    continue  # never expected after assign(); keeps the range exact if it happens
                ts_type, ts_ms = msg.timestamp()
                keys.append(msg.key())
                values.append(msg.value())
                offsets.append(offset)
                stamps.append(None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts_ms * 1000)
                position = offset + 1
            if position < end:
                # The consumer's position moves past control records (transaction markers) it skips.
                (now,) = consumer.position([TopicPartition(topic, partition)])
                if now.offset >= 0:
                    position = max(position, min(now.offset, end))
            if len(offsets) >= BATCH_ROWS:
                yield batch()
            if position > before:
                deadline = time.monotonic() + timeout
            elif time.monotonic() >= deadline:
                raise KafkaSourceError(
                    f"reading {where}: no progress for {timeout:g} s at offset {position} "
                    f"(broker down, or records not visible yet: see {_OPT_TIMEOUT})"
                )
        if offsets:
            yield batch()
    finally:
        consumer.close()


# --------------------------------------------------------------------------- convenience


def read_kafka(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    starting: str | Mapping[int, int] = "earliest",
    ending: str | Mapping[int, int] = "latest",
    *,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """``topic``'s records in ``[starting, ending)`` as a DataFrame with ``KAFKA_SCHEMA``.

    The offsets are resolved now, in the driver, and pinned as explicit JSON options, so every action on
    the frame reads the same records even while the topic grows (a bare ``spark.read.format("ivmkafka")``
    with ``latest`` resolves again each time a query is planned). ``starting``/``ending`` take the option
    forms or a ``{partition: offset}`` mapping (e.g. from ``resolve_offsets``); ``options`` adds source
    options (``kafka.*``, ``kafkaConsumer.pollTimeoutMs``).
    """
    extra = {str(k): str(v) for k, v in (options or {}).items()}
    kafka_conf = {k[len(_KAFKA_PREFIX) :]: v for k, v in extra.items() if k.lower().startswith(_KAFKA_PREFIX)}
    timeout_ms = next((v for k, v in extra.items() if k.lower() == _OPT_TIMEOUT.lower()), DEFAULT_TIMEOUT_MS)
    ranges = resolve_offsets(
        bootstrap, topic, starting, ending, conf=kafka_conf, timeout=int(timeout_ms) / 1000
    )
    reader = (
        spark.read.format(FORMAT)
        .option(_OPT_BOOTSTRAP, bootstrap)
        .option(_OPT_TOPIC, topic)
        .option(_OPT_START, offsets_json({p: s for p, (s, _) in ranges.items()}))
        .option(_OPT_END, offsets_json({p: e for p, (_, e) in ranges.items()}))
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load()
