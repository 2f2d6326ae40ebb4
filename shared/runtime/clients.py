"""Where a worker's Kafka clients come from: one factory, so the CLI, tests and benchmarks build them the
same way, and the in-process harness (``ivmstream.runtime.harness``) hands in in-memory ones instead.

``Consumer`` and ``Producer`` here are the parts of confluent-kafka's clients the runtime calls; the
factory decides the connection (bootstrap, security), the runtime only its own settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

import confluent_kafka
from confluent_kafka import KafkaError, Message, TopicPartition

from ivmstream.config import ServiceConfig, producer_message_max_bytes
from ivmstream.runtime.kafka import consumer_settings, producer_settings


class Consumer(Protocol):
    def subscribe(
        self, topics: list[str], on_assign: Any = ..., on_revoke: Any = ..., on_lost: Any = ...
    ) -> None: ...
    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]: ...
    def assign(self, partitions: list[TopicPartition]) -> None: ...
    def unassign(self) -> None: ...
    def commit(
        self, *, offsets: list[TopicPartition], asynchronous: Literal[False]
    ) -> list[TopicPartition] | None: ...
    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]: ...
    def get_watermark_offsets(self, partition: TopicPartition, timeout: float = ...) -> tuple[int, int]: ...
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...
    def close(self) -> None: ...


class Producer(Protocol):
    def produce(self, topic: str, value: Any = ..., key: Any = ..., *args: Any, **kwargs: Any) -> None: ...
    def poll(self, timeout: float = -1) -> int: ...
    def flush(self, timeout: float = -1) -> int: ...
    def __len__(self) -> int: ...


class ClientFactory(Protocol):
    """Makes the clients of one cluster; ``bootstrap`` names it in log lines and errors."""

    bootstrap: str

    def consumer(
        self, group: str, session_timeout_ms: int, overrides: Mapping[str, Any] | None = None
    ) -> Consumer: ...

    def producer(self, overrides: Mapping[str, Any] | None = None) -> Producer: ...


class KafkaClients:
    """confluent-kafka clients of the cluster at ``bootstrap``, with the runtime's settings
    (``ivmstream.runtime.kafka``) and the environment's security settings."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def consumer(
        self, group: str, session_timeout_ms: int, overrides: Mapping[str, Any] | None = None
    ) -> Consumer:
        settings = consumer_settings(self.bootstrap, group, session_timeout_ms, overrides)
        return confluent_kafka.Consumer(settings)

    def producer(self, overrides: Mapping[str, Any] | None = None) -> Producer:
        return confluent_kafka.Producer(producer_settings(self.bootstrap, overrides))


def clients_of(clients: ClientFactory | str) -> ClientFactory:
    """A factory as given, or the Kafka clients of a bootstrap address."""
    return KafkaClients(clients) if isinstance(clients, str) else clients


def output_settings(config: ServiceConfig, error_cb: Callable[[KafkaError], None]) -> dict[str, Any]:
    """A worker's producer settings (on top of the factory's). The producer reports outages too: a
    checkpoint waiting on output acknowledgements polls only it. Delivery reports come for failures
    only, so a delivered record (a result, a dead letter in a flood) calls no Python at all; lz4
    batches: a flood's dead letters repeat the bad records' bytes (oversized ones above all), which the
    broker then receives compressed. message.max.bytes leaves room for the largest dead letter
    (docs/security.md, "Hostile input")."""
    return {
        "delivery.report.only.error": True,
        "compression.type": "lz4",
        "message.max.bytes": producer_message_max_bytes(config.dead_letter_max_bytes, config.kafka),
        **config.kafka.get("producer", {}),
        "error_cb": error_cb,
    }
