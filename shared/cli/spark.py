"""The Spark session of ``bootstrap`` and ``reconcile``: a session the command starts is stopped with its
JVM when the command ends, so no JVM outlives it; an active one (a test's, a notebook's) is borrowed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def spark_session(master: str | None) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from ivmstream.spark.session import get_session, stop_session

    borrowed = SparkSession.getActiveSession() is not None
    spark = get_session(master)
    try:
        yield spark
    finally:
        if not borrowed:
            stop_session(spark)
