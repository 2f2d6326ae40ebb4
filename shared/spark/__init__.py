"""Spark for ivmstream: the SparkSession factory and the ``ivmkafka`` batch data source over confluent-kafka.

``get_session()`` starts (or reuses) a session with the source registered, so
``spark.read.format("ivmkafka")`` and ``read_kafka(spark, bootstrap, topic)`` work on it.
"""

from ivmstream.spark.kafka_source import (
    KAFKA_SCHEMA,
    KafkaSource,
    KafkaSourceError,
    read_kafka,
    resolve_offsets,
)
from ivmstream.spark.session import SparkUnavailable, get_session

__all__ = [
    "KAFKA_SCHEMA",
    "KafkaSource",
    "KafkaSourceError",
    "SparkUnavailable",
    "get_session",
    "read_kafka",
    "resolve_offsets",
]
