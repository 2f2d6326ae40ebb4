"""Change records read by Spark: Debezium, Maxwell, Canal and upsert topics and files decoded by the
stream's own ``ChangeCodec``, so a batch job reads them exactly as a worker does.

A record's events depend on the records of its row before it (an upsert input retracts the last image
of its key), so the records are grouped by topic and partition and decoded in offset order, one codec
per topic in each task: a source keeps each row in one partition (Debezium partitions by primary key),
so every row's history is decoded in one task, in its order. The decoded frame is ``DECODED_SCHEMA``
plus ``__image``: after its records, each task also writes the last image of each row its upsert-mode
inputs keep (``__image`` the input, ``__key`` the row's primary key, ``row`` the image), which a
bootstrap stores for the workers to retract from.

A file of change records (``orders.debezium.jsonl``: the relation, then the format without ``-json``)
reads as a topic of one partition whose offsets are its line numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ivmstream.events import Schema
from ivmstream.events.changes import CHANGE_FORMATS, ChangeSpec
from ivmstream.spark.decode import DECODED_SCHEMA, KEY, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

IMAGE = "__image"
CHANGES_SCHEMA = StructType([*DECODED_SCHEMA.fields, StructField(IMAGE, StringType())])
# A change file's name ends in .<format without -json>.jsonl: orders.debezium.jsonl
FILE_FORMATS = {fmt.removesuffix("-json"): fmt for fmt in CHANGE_FORMATS}

Specs = Mapping[str, ChangeSpec | None]  # topic (or file) -> how its records read (None: native)


def change_file(path: Path) -> tuple[str, str] | None:
    """``(relation, format)`` a change file's name gives (None: not a change file)."""
    parts = path.name.split(".")
    if len(parts) == 3 and parts[2] == "jsonl" and parts[1] in FILE_FORMATS:
        return parts[0], FILE_FORMATS[parts[1]]
    return None


def file_spec(relation: str | None, fmt: str, inputs: Specs) -> ChangeSpec:
    """How a change file of ``relation`` (None: each record's table) reads: as the view's input of that
    format and relation reads its records (mode, primary key, projection), else in the format's default
    mode."""
    for spec in inputs.values():
        if spec is not None and spec.format == fmt and spec.relation in (relation, None):
            return ChangeSpec(fmt, relation, spec.primary_key, spec.project, spec.images)
    if fmt == "upsert-json" and relation is None:
        raise ValueError("an upsert-json file's rows name no table: name the file after its relation")
    return ChangeSpec(fmt, relation, images=fmt == "upsert-json")


def read_change_file(spark: SparkSession, path: Path) -> DataFrame:
    """A file's non-blank lines as Kafka records of one partition: ``value``, ``topic`` (the file's path),
    ``partition`` 0, ``offset`` in line order, no key."""
    lines = spark.read.text(str(path)).where(F.length(F.trim("value")) > 0)
    return lines.select(
        F.lit(None).cast("binary").alias("key"),
        F.trim("value").cast("binary").alias("value"),
        F.lit(str(path)).alias("topic"),
        F.lit(0).alias("partition"),
        F.monotonically_increasing_id().alias("offset"),  # increasing in file order
    )


def decode_changes(records: DataFrame, schema: Schema, specs: Specs) -> DataFrame:
    """Records (``key``, ``value``, ``topic``, ``partition``, ``offset``) of the topics (or files) in
    ``specs`` to decoded events and the upsert inputs' final images (``CHANGES_SCHEMA``)."""
    ordered = records.select("key", "value", "topic", "partition", "offset").repartition("topic", "partition")
    ordered = ordered.sortWithinPartitions("topic", "partition", "offset")
    return ordered.mapInArrow(_decoder(schema, dict(specs)), CHANGES_SCHEMA)


def _decoder(schema: Schema, specs: dict[str, ChangeSpec | None]) -> Any:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import orjson
        import pyarrow as pa

        from ivmstream.events import EventCodec, EventError
        from ivmstream.events.change_formats import ChangeCodec

        native = EventCodec(schema)
        codecs: dict[str, ChangeCodec] = {}
        arrow = arrow_schema(CHANGES_SCHEMA)
        names = CHANGES_SCHEMA.fieldNames()

        def row(**values: Any) -> None:
            for name in names:
                cols[name].append(values.get(name))

        for batch in batches:
            cols: dict[str, list[Any]] = {name: [] for name in names}
            columns = [batch.column(c).to_pylist() for c in ("key", "value", "topic", "partition", "offset")]
            for key, value, topic, partition, offset in zip(*columns, strict=True):
                spec = specs.get(topic)
                if spec is None:
                    [item] = native.decode_many([value])
                    out: Any = item if isinstance(item, EventError) else [item]
                else:
                    codec = codecs.get(topic)
                    if codec is None:
                        codec = codecs[topic] = ChangeCodec(spec, schema)
                    out = codec.decode(key, value)
                where = {"partition": partition, "offset": offset}
                if isinstance(out, EventError):
                    row(**where, error=out.code)
                    continue
                for event in out:
                    text = orjson.dumps(event.row, default=str).decode()
                    key_value = event.key if event.key is not None else ""
                    row(**where, relation=event.relation, delta=event.delta, row=text, **{KEY: key_value})
            yield pa.RecordBatch.from_pydict(cols, schema=arrow)
        cols = {name: [] for name in names}
        for topic, codec in codecs.items():
            for (relation, identity), image in (
                codec.images.rows if codec.images is not None else {}
            ).items():
                text = orjson.dumps(image).decode()
                row(relation=relation, row=text, **{KEY: identity, IMAGE: topic})
        if cols[IMAGE]:
            yield pa.RecordBatch.from_pydict(cols, schema=arrow)

    return decode


def events_of(decoded: DataFrame) -> DataFrame:
    """The decoded events and refusals, without the images."""
    return decoded.where(F.col(IMAGE).isNull()).drop(IMAGE)


def images_of(decoded: DataFrame) -> list[tuple[str, str, str, str]]:
    """``(input, relation, primary key, image JSON)`` of every row an upsert input keeps, collected."""
    rows = decoded.where(F.col(IMAGE).isNotNull()).select(IMAGE, "relation", KEY, "row").collect()
    return [(r[IMAGE], r["relation"], r[KEY], r["row"]) for r in rows]
