"""The one way ivmstream starts Spark: a local-friendly SparkSession with the Kafka data source registered."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DEFAULT_MASTER", "SparkUnavailable", "command_session", "get_session", "stop_session"]

DEFAULT_MASTER = "local[*]"
LOCAL_SHUFFLE_PARTITIONS = 4


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java, or the JVM failed to come up); the message is one line."""


def _check_java() -> None:
    """Spark's launcher prefers $JAVA_HOME/bin/java and falls back to ``java`` on PATH: check the same."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not (candidate.is_file() and os.access(candidate, os.X_OK)):
            raise SparkUnavailable(f"Spark needs Java 17+: JAVA_HOME={java_home} has no executable bin/java")
    elif shutil.which("java") is None:
        raise SparkUnavailable("Spark needs Java 17+: no 'java' on PATH and JAVA_HOME is not set")


def _register_sources(spark: SparkSession) -> None:
    from ivmstream.spark.kafka_source import KafkaSource

    spark.dataSource.register(KafkaSource)


def get_session(master: str | None = None, app_name: str = "ivmstream", ui: bool = False) -> SparkSession:
    """A SparkSession on ``master`` (``local[*]`` if None), reusing the active one if there is one.

    The driver binds to 127.0.0.1, the UI is off unless ``ui``, timestamps are UTC, logs are WARN, and
    Python workers run this interpreter. ``spark.read.format("ivmkafka")`` works on the result.
    Raises SparkUnavailable when no Java is found or the JVM does not start.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _register_sources(active)  # idempotent: re-registering replaces the same class
        return active

    _check_java()
    # Workers (and the driver-side planner workers) must run the interpreter that has ivmstream on it.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    master = master or DEFAULT_MASTER
    if master.startswith("local"):
        # Keep a local Spark on loopback (and skip its "hostname resolves to a loopback address" probe).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.log.level", "WARN")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
    )
    if master.startswith("local"):
        builder = builder.config("spark.sql.shuffle.partitions", str(LOCAL_SHUFFLE_PARTITIONS))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / JVM launch failures are long; keep the first line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SparkUnavailable(f"cannot start Spark on {master}: {first}") from exc
    spark.sparkContext.setLogLevel("WARN")
    _register_sources(spark)
    return spark


def stop_session(spark: SparkSession, timeout: float = 30.0) -> None:
    """Stop ``spark`` and its JVM, and wait until the JVM has exited.

    ``SparkSession.stop()`` ends the SparkContext but leaves PySpark's gateway JVM running until this
    interpreter exits (the JVM leaves when its stdin closes), so a program that stops Spark and then
    returns would leave the JVM behind for a moment. Here the gateway is shut down, the JVM's stdin
    closed and the JVM waited for (killed after ``timeout`` seconds). A later ``get_session`` starts a
    new JVM."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):  # a gateway whose JVM already left cannot be told to stop
        gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def command_session(master: str | None) -> Iterator[SparkSession]:
    """The session of a command (``bootstrap``, ``reconcile``, their ``sql`` forms): one the command starts
    is stopped with its JVM when the command ends, so no JVM outlives it; an active one (a test's, a
    notebook's) is borrowed and left running."""
    from pyspark.sql import SparkSession

    borrowed = SparkSession.getActiveSession() is not None
    spark = get_session(master)
    try:
        yield spark
    finally:
        if not borrowed:
            stop_session(spark)
