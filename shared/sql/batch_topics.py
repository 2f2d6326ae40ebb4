"""``sql bootstrap`` of a view over topic-backed tables, beside static tables from files (Spark).

The unit's workers read the tables' topics as the runtime's ``inputs`` (``ivmstream.sql.topics``), so
its state has the layout of a keyless view over inputs: ``ivmstream.spark.inputs`` reads every table
topic from its beginning to its end, decodes it by the table's format (keeping the upsert images the
workers would keep) and writes the state with the end offsets the workers resume from. The service's
Spark job builds that state from the service's relations, which the view's intake makes from the
tables: the tables' net bags pass through the unit's feeds (selections, derived factors, the renaming
onto the service's relations), and a static table from a file joins them as its rows, once (the
workers never read it: bootstrap is how it enters the state).
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from ivmstream.runtime.apply import KEYLESS
from ivmstream.service import load_service
from ivmstream.spark.decode import KEY, MULT, SPARK_TYPES
from ivmstream.spark.runs import run_bootstrap
from ivmstream.sql.errors import SqlError
from ivmstream.sql.inputs import InputChoice, read_events
from ivmstream.sql.model import Script
from ivmstream.sql.streaming import StreamUnit

Rows = dict[str, Counter[tuple[Any, ...]]]  # service relation -> (key, values...) -> multiplicity


def bootstrap_topic_unit(
    spark: SparkSession,
    script: Script,
    u: StreamUnit,
    choice: InputChoice,
    store: Any,
    bootstrap_servers: str | None,
    from_offsets: str,
) -> dict[str, Any]:
    """One unit over topic-backed tables (and static tables from files): its state from the topics
    (read to ``from_offsets``: latest, or earliest for the files alone) and the files; its report."""
    view = u.plan.view.name
    if bootstrap_servers is None:
        raise SqlError(
            f"bootstrap of view {view} reads its tables' topics ({', '.join(t.name for t in u.tables)}): "
            "give --bootstrap ADDR",
            u.tables[0].where,
        )
    inner = load_service(u.unit.service)
    relations = {r.name: r for r in inner.relations(u.config.options)}
    files = Counter[tuple[str, tuple[Any, ...]]]()
    for table, row, delta in read_events(script, {t.name for t in u.files}, choice):
        for feed in u.unit.feeds:
            ev = feed.event(row, delta) if feed.table == table else None
            if ev is not None:
                cols = relations[ev["relation"]].column_names
                files[(ev["relation"], (KEYLESS, *(ev["row"][c] for c in cols)))] += ev["delta"]

    def service_relations(spark: SparkSession, bags: dict[str, DataFrame]) -> dict[str, DataFrame]:
        rows: Rows = {name: Counter() for name in relations}
        for (name, values), m in files.items():
            rows[name][values] += m
        for table, frame in bags.items():
            columns = list(script.tables[table].columns)
            feeds = [f for f in u.unit.feeds if f.table == table]
            for record in frame.toLocalIterator():
                base = {c: record[c] for c in columns}
                for feed in feeds:
                    ev = feed.event(base, record[MULT])
                    if ev is not None:
                        cols = relations[ev["relation"]].column_names
                        rows[ev["relation"]][(record[KEY], *(ev["row"][c] for c in cols))] += ev["delta"]
        return {name: _frame(spark, relations[name], bag) for name, bag in rows.items()}

    report = run_bootstrap(
        spark,
        u.service,
        u.config,
        None,
        store,
        bootstrap_servers=bootstrap_servers,
        from_offsets=from_offsets,
        relations_of=service_relations,
    )
    return {
        "view": view,
        "service": u.service.name,
        "input": [i.topic for i in u.config.inputs],
        "resume": report.inputs,
        "files": sorted(t.name for t in u.files),
        "bytes": report.bytes_written,
    }


def _frame(spark: SparkSession, relation: Any, bag: Counter[tuple[Any, ...]]) -> DataFrame:
    """A service relation's rows (key, columns, multiplicity) as the batch jobs read them."""
    types = dict(relation.columns)
    schema = StructType(
        [
            StructField(KEY, StringType()),
            *(StructField(c, SPARK_TYPES[t]) for c, t in relation.columns),
            StructField(MULT, LongType()),
        ]
    )
    exact = [i for i, c in enumerate(relation.column_names, 1) if types[c] in ("decimal", "exact")]
    out = []
    for values, m in bag.items():
        if m == 0:
            continue
        row = list(values)
        for i in exact:
            row[i] = None if row[i] is None else Decimal(str(row[i]))
        out.append((*row, m))
    return spark.createDataFrame(out, schema)
