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
