"""The Spark session of ``bootstrap`` and ``reconcile``."""

from __future__ import annotations

from typing import Any


def spark_session(master: str | None) -> Any:
    from ivmstream.spark.session import get_session

    return get_session(master)
