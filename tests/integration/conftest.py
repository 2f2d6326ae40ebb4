"""Integration fixtures: one SparkSession for the whole test session (it costs ~10 s to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from ivmstream.spark.session import get_session

    # No skip when Java is missing: `make setup` installs it, so its absence is a failure to report.
    session = get_session("local[2]", app_name="ivmstream-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def one_shuffle_partition(spark: SparkSession) -> Iterator[None]:
    """For a module whose data is tiny (``usefixtures``): one shuffle partition saves a task per stage of
    each plan; the session's setting is put back after the module."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)
