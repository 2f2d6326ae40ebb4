"""Snapshot readers: a relation's rows (with multiplicities) as of some point, from files.

A snapshot PATH is either a directory with one table per relation, named after it (``R.csv``,
``R.tbl``, ``R.parquet`` or a Parquet directory ``R/``, ``R.jsonl``), or a single ``.jsonl`` file of
update events. Tables hold the relation's columns (plus the key column when the service has one)
and optionally ``delta`` (the multiplicity, default 1). CSV files have a header unless they are
``|``-separated like DBToaster's TPC-H tables, which are headerless in the relation's column order.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from ivmstream.events import Relation, Schema
from ivmstream.spark.decode import DECIMAL, KEY, MULT, SPARK_TYPES, decode_log, events_by_relation

SUFFIXES = (".csv", ".tbl", ".parquet", ".jsonl")


class SnapshotError(ValueError):
    pass


def _typed(df: DataFrame, rel: Relation, key_field: str | None, source: str) -> DataFrame:
    present = set(df.columns)
    missing = [c for c in rel.column_names if c not in present]
    if missing:
        raise SnapshotError(f"{source}: lacks column(s) {', '.join(missing)} of relation {rel.name}")
    if key_field is not None and key_field not in present:
        raise SnapshotError(f"{source}: lacks the partition key column {key_field!r}")
    key = F.col(key_field).cast("string") if key_field else F.lit("")
    mult = F.col("delta").cast("long") if "delta" in present else F.lit(1).cast("long")
    cols = [
        F.col(c).cast(DECIMAL if t in ("decimal", "exact") else SPARK_TYPES[t]).alias(c)
        for c, t in rel.columns
    ]
    return df.select(key.alias(KEY), *cols, mult.alias(MULT))


def _read_table(spark: SparkSession, path: Path, rel: Relation, key_field: str | None) -> DataFrame:
    if path.is_dir() or path.suffix == ".parquet":
        df = spark.read.parquet(str(path))
    elif path.suffix == ".jsonl":
        df = spark.read.json(str(path), primitivesAsString=True)
    else:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
        if "|" in first:  # DBToaster/TPC-H: headerless, trailing '|'
            names = list(rel.column_names)
            if key_field:
                names.append(key_field)
            fields = [StructField(n, StringType()) for n in names] + [StructField("_trailing", StringType())]
            df = spark.read.csv(str(path), sep="|", header=False, schema=StructType(fields)).drop("_trailing")
        else:
            df = spark.read.csv(
                str(path),
                header=True,
                inferSchema=False,
                ignoreLeadingWhiteSpace=True,
                ignoreTrailingWhiteSpace=True,
            )
    return _typed(df, rel, key_field, str(path))


def read_snapshot(spark: SparkSession, path: str | Path, schema: Schema) -> dict[str, DataFrame]:
    """Each relation's snapshot rows: key, typed columns, ``__mult`` (not yet netted)."""
    p = Path(path)
    if not p.exists():
        raise SnapshotError(f"snapshot not found: {path}")
    if p.is_file():
        if p.suffix != ".jsonl":
            raise SnapshotError(
                f"a snapshot file must be .jsonl update events; tables go in a directory: {path}"
            )
        records = spark.read.text(str(p)).select(
            F.col("value").cast("binary").alias("value"),
            F.lit(0).alias("partition"),
            F.monotonically_increasing_id().alias("offset"),
        )
        events = events_by_relation(decode_log(records, schema), schema)
        return {
            name: df.select(KEY, *schema.relations[name].column_names, MULT) for name, df in events.items()
        }
    out = {}
    for name, rel in schema.relations.items():
        candidates = [p / f"{name}{s}" for s in SUFFIXES] + [p / name]
        found = [c for c in candidates if c.exists()]
        if not found:
            raise SnapshotError(
                f"snapshot {path} has no table for relation {name!r} (looked for {name}.csv, "
                f"{name}.tbl, {name}.parquet, {name}.jsonl or {name}/)"
            )
        out[name] = _read_table(spark, found[0], rel, schema.key_field)
    return out
