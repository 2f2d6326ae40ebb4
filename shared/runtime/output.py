"""Where a worker's output goes: results to the output topic, Redis and PostgreSQL, bad input to the DLQ.

Results are published before the checkpoint that covers them, each tagged with the input offset it
reflects, so a crash can only cause re-publication of an identical (result, offset) pair, never a
lost result. Delivery failures stop the worker before it checkpoints past them.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import orjson
import redis
from confluent_kafka import KafkaError, KafkaException, Message

from ivmstream.config import DEAD_LETTER_KEY_MAX_BYTES, DEAD_LETTER_MAX_BYTES
from ivmstream.retry import with_retries
from ivmstream.runtime.clients import Producer
from ivmstream.runtime.postgres import PostgresSink, SinkFailed

try:  # the compiled dead-letter loop (setup.py); without it the same is done in Python
    import ivmstream.runtime._deadletters as _deadletters
except ImportError:  # pragma: no cover - a build without a C compiler
    _deadletters = None  # type: ignore[assignment]

RESULT_PREFIX = "ivmstream:results"


def result_key(output_topic: str, key: str) -> str:
    return f"{RESULT_PREFIX}:{output_topic}:{key}"


def result_index(output_topic: str) -> str:
    return f"{RESULT_PREFIX}:{output_topic}:__keys__"


def changes_channel(output_topic: str) -> str:
    """The pub/sub channel told, per Redis write, which keys' results changed (``ivmstream serve``)."""
    return f"{RESULT_PREFIX}:{output_topic}:__changes__"


def writers_key(output_topic: str) -> str:
    """A hash of the workers publishing to ``output_topic`` (one field each): a field that vanished
    means Redis lost what it held (docs/architecture.md, "Redis outages")."""
    return f"ivmstream:writers:{output_topic}"


class DeliveryFailed(RuntimeError):
    pass


# No checkpoint covers input whose output was refused: a restart computes and publishes it again.
_RESUME = "exiting with the state at its last checkpoint: once that is fixed, a restart publishes them again"


_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)

# Distinct dead-letter details whose encoded header is kept: a flood repeats a few (a fixed text per kind,
# the same column errors), and an unbounded variety only resets the cache.
_DETAILS_KEPT = 4096


class Output:
    def __init__(
        self,
        service: str,
        producer: Producer,
        output_topic: str,
        dlq_topic: str,
        redis_client: redis.Redis | None,
        redis_retry_seconds: float = 30.0,
        dead_letter_max_bytes: int = DEAD_LETTER_MAX_BYTES,
        postgres: PostgresSink | None = None,
    ) -> None:
        self.service = service
        self.dead_letter_max_bytes = dead_letter_max_bytes
        self.producer = producer
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.redis = redis_client
        self.redis_retry_seconds = redis_retry_seconds
        self.postgres = postgres
        self.writer = uuid.uuid4().hex  # this worker's field in the writers hash
        self._registered = False  # whether Redis has held this worker's field
        self._failures: list[str] = []
        self._service_header: tuple[str, str | bytes | None] = ("ivmstream.service", service.encode())
        self._reason_headers: dict[str, tuple[str, str | bytes | None]] = {}
        self._detail_headers: dict[str, tuple[str, str | bytes | None]] = {}

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:  # librdkafka retried what could be retried: this record is refused for good
            self._failures.append(f"{msg.topic()}: {err.name()} ({err.str()})")

    def _produce(self, topic: str, value: bytes, key: bytes | None, headers: Any = None, partition: int = -1):
        while True:
            try:
                self.producer.produce(
                    topic, value, key, partition=partition, headers=headers, on_delivery=self._on_delivery
                )
                return
            except BufferError:  # local queue full: let librdkafka drain it, then retry
                self.producer.poll(0.05)
            except KafkaException as exc:  # refused before sending (e.g. the topic failed for good)
                err = exc.args[0]
                raise DeliveryFailed(
                    f"cannot publish to {topic}: {err.name()} ({err.str()}); {_RESUME}"
                ) from None

    def dead_letters(self, refused: Iterable[tuple[Message, str, str]]) -> None:
        """Dead-letter each ``(record, reason code, detail)`` in one loop: a flood of bad records costs one
        produce per record and little else. The constant headers are built once per code (and per detail,
        since a flood repeats a few), and ``produce`` takes its arguments by position, which it parses
        faster than keywords. A value longer than ``dead_letter_max_bytes`` (a key longer than
        DEAD_LETTER_KEY_MAX_BYTES) is cut to it, with its full length in the ivmstream.truncated
        (ivmstream.key-truncated) header: every dead letter fits the producer's message size limit, so no
        record can stop its partition."""
        max_value, max_key = self.dead_letter_max_bytes, DEAD_LETTER_KEY_MAX_BYTES
        produce = self.producer.produce
        topic = self.dlq_topic
        on_delivery = self._on_delivery
        service = self._service_header
        reasons = self._reason_headers
        details = self._detail_headers
        for msg, code, detail in refused:
            reason = reasons.get(code)
            if reason is None:
                reason = reasons[code] = ("ivmstream.reason", code.encode())
            said = details.get(detail)
            if said is None:
                if len(details) >= _DETAILS_KEPT:
                    details.clear()
                said = details[detail] = ("ivmstream.detail", detail.encode())
            headers = [
                reason,
                said,
                service,
                ("ivmstream.source", f"{msg.topic()}:{msg.partition()}:{msg.offset()}".encode()),
            ]
            value = msg.value() or b""
            key = msg.key()
            if len(value) > max_value:
                headers.append(("ivmstream.truncated", str(len(value)).encode()))
                value = value[:max_value]
            if key is not None and len(key) > max_key:
                headers.append(("ivmstream.key-truncated", str(len(key)).encode()))
                key = key[:max_key]
            try:  # topic, value, key, partition (-1: by key), callback, its alias, timestamp, headers
                produce(topic, value, key, -1, on_delivery, None, 0, headers)
            except (BufferError, KafkaException):  # queue full, or refused: the path that handles both
                self._produce(topic, value, key, headers)

    def dead_letter_decoded(
        self, topic: str, partition: int, msgs: list[Message], decoded: list[Any], event_type: type
    ) -> dict[str, int]:
        """Dead-letter, as ``dead_letters`` does, the records of ``topic:partition`` whose decoded item is an
        error (not an ``event_type``), in their order; returns how many per reason code. The loop runs in
        C where it is built (shared/runtime/_deadletters.c), so that a refused record costs its produce
        call and little else."""
        if _deadletters is None:
            refused = [
                (msgs[i], e.code, e.detail) for i, e in enumerate(decoded) if e.__class__ is not event_type
            ]
            self.dead_letters(refused)
            counts: dict[str, int] = {}
            for _, code, _ in refused:
                counts[code] = counts.get(code, 0) + 1
            return counts
        return _deadletters.produce_refused(
            self.producer.produce,
            self._produce,
            self.dlq_topic,
            self._on_delivery,
            self._service_header,
            self._reason_headers,
            self.dead_letter_max_bytes,
            DEAD_LETTER_KEY_MAX_BYTES,
            f"{topic}:{partition}:".encode(),
            msgs,
            decoded,
            event_type,
        )

    def publish(self, records: Iterable[tuple[str, dict[str, Any]]], partition: int = -1) -> int:
        """Publish (key, record) pairs to the topic and, in one pipeline, to Redis; ``partition`` -1
        places each record by its key."""
        staged: list[tuple[str, bytes]] = []
        records_of: list[tuple[str, dict[str, Any]]] = []
        for key, record in records:
            value = orjson.dumps(record)
            records_of.append((key, record))
            # keyless: b"", one partition
            self._produce(self.output_topic, value, key.encode(), partition=partition)
            staged.append((key, value))
        if self.redis is not None and staged:
            self._to_redis(staged)
        if self.postgres is not None and staged:
            self.postgres.submit(records_of)
        self.producer.poll(0)
        return len(staged)

    def publish_changes(self, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Changelog records (``emit: every-event``) to the output topic only, keyed by their key."""
        n = 0
        for key, record in records:
            self._produce(self.output_topic, orjson.dumps(record), key.encode())
            n += 1
        self.producer.poll(0)
        return n

    def store_latest(self, records: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Each key's full latest record to Redis only (the topic carries the changelog)."""
        records = list(records)
        staged = [(key, orjson.dumps(record)) for key, record in records]
        if self.redis is not None and staged:
            self._to_redis(staged)
        if self.postgres is not None and staged:
            self.postgres.submit(records)
        return len(staged)

    def _redis_call(self, call: Callable[[], Any], what: str) -> Any:
        """Retried while Redis is unreachable, up to ``redis_retry_seconds``; then the error stops the
        worker (before its next checkpoint, so a restart publishes these results again)."""
        return with_retries(call, what=what, retry_on=_UNREACHABLE, give_up_after=self.redis_retry_seconds)[0]

    def _to_redis(self, staged: list[tuple[str, bytes]]) -> None:
        """One pipeline per attempt (a pipeline that failed has forgotten its commands)."""
        assert self.redis is not None
        client, topic = self.redis, self.output_topic

        def write() -> None:
            pipe = client.pipeline(transaction=False)
            for key, value in staged:
                pipe.set(result_key(topic, key), value)
            pipe.sadd(result_index(topic), *(key for key, _ in staged))
            pipe.publish(changes_channel(topic), orjson.dumps([key for key, _ in staged]))
            if not self._registered:
                pipe.hset(writers_key(topic), self.writer, str(time.time()))
            pipe.execute()

        self._redis_call(write, f"publish {len(staged)} results to Redis")
        self._registered = True

    def redis_lost_results(self) -> bool:
        """Whether Redis no longer holds this worker's field (it restarted empty or was flushed) since
        results were published; the field is put back, so each loss is reported once."""
        if self.redis is None or not self._registered:
            return False
        client, topic = self.redis, self.output_topic
        present = self._redis_call(lambda: client.hexists(writers_key(topic), self.writer), "check Redis")
        if present:
            return False
        self._redis_call(
            lambda: client.hset(writers_key(topic), self.writer, str(time.time())), "write Redis"
        )
        return True

    @property
    def keeps_results(self) -> bool:
        """Whether each key's latest result is kept outside the topic (Redis, PostgreSQL)."""
        return self.redis is not None or self.postgres is not None

    def missing_results(self, keys: list[str], result_of: Callable[[str], Any]) -> list[str]:
        """The keys among ``keys`` with no result in Redis, or whose PostgreSQL row is missing or holds
        another result than ``result_of(key)`` (periodic checkpoints do not wait for PostgreSQL)."""
        if not keys:
            return []
        missing = self._missing_in_redis(keys)
        if self.postgres is not None:
            held = set(missing)
            missing += [k for k in self.postgres.stale(keys, result_of) if k not in held]
        return missing

    def _missing_in_redis(self, keys: list[str]) -> list[str]:
        if self.redis is None:
            return []
        client, index = self.redis, result_index(self.output_topic)
        missing: list[str] = []
        for i in range(0, len(keys), 10_000):
            chunk = keys[i : i + 10_000]
            held = self._redis_call(partial(client.smismember, index, chunk), "read Redis")
            missing += [k for k, h in zip(chunk, held, strict=True) if not h]
        return missing

    def leave(self) -> None:
        """A clean shutdown removes this worker's field (best effort) and stops the PostgreSQL sink."""
        if self.redis is not None and self._registered:
            with contextlib.suppress(redis.RedisError):
                self.redis.hdel(writers_key(self.output_topic), self.writer)
        if self.postgres is not None:
            self.postgres.close()

    def flush(
        self, timeout: float = 60.0, check: Callable[[], None] | None = None, *, postgres: bool = True
    ) -> None:
        """Wait until every result and dead letter is acknowledged; raise if any was lost. ``check``
        runs every second while waiting, so a worker can give up on an unreachable cluster sooner.
        ``postgres`` False: only raise if the PostgreSQL sink failed, without waiting for its writes
        (a periodic checkpoint; a restored partition publishes again what the sink had not written)."""
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
            raise DeliveryFailed(f"{n} output records were not delivered, the first to {first}; {_RESUME}")
        if self.postgres is not None:
            try:
                if postgres:
                    self.postgres.flush(max(1.0, deadline - time.monotonic()), check)
                else:
                    self.postgres.check()
            except SinkFailed as exc:
                raise DeliveryFailed(f"{exc}; {_RESUME}") from None


def build_record(service: str, key: str, result: Any, topic: str, partition: int, next_offset: int) -> dict:
    """The published shape: the result and the input it reflects (offsets are exclusive ends)."""
    return {
        "service": service,
        "key": key,
        "result": result,
        "offsets": {f"{topic}:{partition}": next_offset},
        "published_at": time.time(),
    }
