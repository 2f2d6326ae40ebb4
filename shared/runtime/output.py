"""Where a worker's output goes: results to the output topic and Redis, bad input to the DLQ.

Results are published before the checkpoint that covers them, each tagged with the input offset it
reflects, so a crash can only cause re-publication of an identical (result, offset) pair, never a
lost result. Delivery failures stop the worker before it checkpoints past them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import redis
from confluent_kafka import KafkaError, Message, Producer

RESULT_PREFIX = "ivmstream:results"


def result_key(output_topic: str, key: str) -> str:
    return f"{RESULT_PREFIX}:{output_topic}:{key}"


def result_index(output_topic: str) -> str:
    return f"{RESULT_PREFIX}:{output_topic}:__keys__"


class DeliveryFailed(RuntimeError):
    pass


class Output:
    def __init__(
        self,
        service: str,
        producer: Producer,
        output_topic: str,
        dlq_topic: str,
        redis_client: redis.Redis | None,
    ) -> None:
        self.service = service
        self.producer = producer
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.redis = redis_client
        self._failures: list[str] = []

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._failures.append(err.str())

    def _produce(self, topic: str, value: bytes, key: bytes | None, headers: Any = None, partition: int = -1):
        while True:
            try:
                self.producer.produce(
                    topic, value, key, partition=partition, headers=headers, on_delivery=self._on_delivery
                )
                return
            except BufferError:  # local queue full: let librdkafka drain it, then retry
                self.producer.poll(0.05)

    def dead_letter(self, msg: Message, code: str, detail: str) -> None:
        """The original bytes with why they were refused and where they came from."""
        headers = [
            ("ivmstream.reason", code.encode()),
            ("ivmstream.detail", detail.encode()),
            ("ivmstream.service", self.service.encode()),
            ("ivmstream.source", f"{msg.topic()}:{msg.partition()}:{msg.offset()}".encode()),
        ]
        self._produce(self.dlq_topic, msg.value() or b"", msg.key(), headers)

    def publish(self, records: Iterable[tuple[str, dict[str, Any]]], partition: int = -1) -> int:
        """Publish (key, record) pairs to the topic and, in one pipeline, to Redis; ``partition`` -1
        places each record by its key."""
        pipe = self.redis.pipeline(transaction=False) if self.redis is not None else None
        n = 0
        for key, record in records:
            value = orjson.dumps(record)
            # keyless: b"", one partition
            self._produce(self.output_topic, value, key.encode(), partition=partition)
            if pipe is not None:
                pipe.set(result_key(self.output_topic, key), value)
                pipe.sadd(result_index(self.output_topic), key)
            n += 1
        if pipe is not None and n:
            pipe.execute()
        self.producer.poll(0)
        return n

    def flush(self, timeout: float = 60.0, check: Callable[[], None] | None = None) -> None:
        """Wait until every result and dead letter is acknowledged; raise if any was lost. ``check``
        runs every second while waiting, so a worker can give up on an unreachable cluster sooner."""
        deadline = time.monotonic() + timeout
        while self.producer.flush(min(1.0, max(0.0, deadline - time.monotonic()))) > 0:
            if check is not None:
                check()
            if time.monotonic() >= deadline:
                raise DeliveryFailed(
                    f"{len(self.producer)} output records not acknowledged within {timeout}s"
                )
        if self._failures:
            first, n = self._failures[0], len(self._failures)
            self._failures.clear()
            raise DeliveryFailed(f"{n} output records were not delivered: {first}")


def build_record(service: str, key: str, result: Any, topic: str, partition: int, next_offset: int) -> dict:
    """The published shape: the result and the input it reflects (offsets are exclusive ends)."""
    return {
        "service": service,
        "key": key,
        "result": result,
        "offsets": {f"{topic}:{partition}": next_offset},
        "published_at": time.time(),
    }
