"""Update events read by Spark: decoded with the service's own codec, typed per relation, netted.

Decoding runs the same ``EventCodec`` as the stream (so both reject exactly the same records), in
``mapInArrow`` on the executors. Each relation becomes a typed DataFrame; a bag is a DataFrame of
the key column, the relation's columns and ``__mult``, the net multiplicity.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ivmstream.events import Relation, Schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

KEY = "__key"  # the partition key column of every bag ("" for keyless services)
MULT = "__mult"  # net multiplicity
DECIMAL = DecimalType(38, 18)  # exact decimals with 18 fractional digits

SPARK_TYPES: dict[str, DataType] = {
    "int": LongType(),
    "float": DoubleType(),
    "number": DoubleType(),
    "str": StringType(),
    "bool": BooleanType(),
    "decimal": DECIMAL,
    "exact": DECIMAL,  # ints and decimals; Spark reads both as exact decimals
}

DECODED_SCHEMA = StructType(
    [
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("relation", StringType()),
        StructField(KEY, StringType()),
        StructField("delta", LongType()),
        StructField("row", StringType()),  # the validated row as JSON (decimals as exact strings)
        StructField("error", StringType()),  # the rejection code, for records the codec refuses
    ]
)


def _decoder(schema: Schema):
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import orjson
        import pyarrow as pa

        from ivmstream.events import EventCodec, EventError

        codec = EventCodec(schema)
        arrow = arrow_schema(DECODED_SCHEMA)
        for batch in batches:
            values = batch.column("value").to_pylist()
            cols: dict[str, list[Any]] = {f.name: [] for f in DECODED_SCHEMA.fields}
            cols["partition"] = batch.column("partition").to_pylist()
            cols["offset"] = batch.column("offset").to_pylist()
            for item in codec.decode_many(values):
                if isinstance(item, EventError):
                    for name in ("relation", KEY, "delta", "row"):
                        cols[name].append(None)
                    cols["error"].append(item.code)
                else:
                    cols["relation"].append(item.relation)
                    cols[KEY].append(item.key if item.key is not None else "")
                    cols["delta"].append(item.delta)
                    cols["row"].append(orjson.dumps(item.row, default=str).decode())
                    cols["error"].append(None)
            yield pa.RecordBatch.from_pydict(cols, schema=arrow)

    return decode


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema ``mapInArrow`` needs the batches it yields for ``schema`` in, derived by Spark's
    own conversion so that the two cannot disagree."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def decode_log(records: DataFrame, schema: Schema) -> DataFrame:
    """Kafka records (``value``, ``partition``, ``offset``) to decoded events; bad ones keep ``error``."""
    return records.select("value", "partition", "offset").mapInArrow(_decoder(schema), DECODED_SCHEMA)


def row_struct(relation: Relation) -> StructType:
    """How a validated row's JSON is read back: decimals as strings first, then cast exactly."""
    return StructType(
        [
            StructField(c, StringType() if t in ("decimal", "exact") else SPARK_TYPES[t])
            for c, t in relation.columns
        ]
    )


def typed_columns(relation: Relation, struct_col: str) -> list[Any]:
    return [
        (
            F.col(f"{struct_col}.{c}").cast(DECIMAL)
            if t in ("decimal", "exact")
            else F.col(f"{struct_col}.{c}")
        ).alias(c)
        for c, t in relation.columns
    ]


def events_by_relation(decoded: DataFrame, schema: Schema) -> dict[str, DataFrame]:
    """Valid decoded events per relation: key, typed columns, ``__mult`` (= delta), partition, offset."""
    valid = decoded.where(F.col("error").isNull())
    out = {}
    for name, rel in schema.relations.items():
        parsed = valid.where(F.col("relation") == name).withColumn("_r", F.from_json("row", row_struct(rel)))
        out[name] = parsed.select(
            F.col(KEY), *typed_columns(rel, "_r"), F.col("delta").alias(MULT), "partition", "offset"
        )
    return out


def append_events(parts: Mapping[str, list[DataFrame]], decoded: DataFrame, schema: Schema) -> None:
    """Each relation's valid decoded events (key, columns, ``__mult``) added to its frames in ``parts``."""
    for name, events in events_by_relation(decoded, schema).items():
        parts[name].append(events.select(KEY, *schema.relations[name].column_names, MULT))


def net_bags(parts: Mapping[str, list[DataFrame]], schema: Schema) -> dict[str, DataFrame]:
    """Union the pieces of each relation (snapshot rows, log events) and net their multiplicities."""
    out = {}
    for name, rel in schema.relations.items():
        cols = [KEY, *rel.column_names]
        frames = [f.select(*cols, MULT) for f in parts.get(name, [])]
        if not frames:
            raise ValueError(f"no input for relation {name!r}")
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        out[name] = union.groupBy(*cols).agg(F.sum(MULT).alias(MULT)).where(F.col(MULT) != 0)
    return out
