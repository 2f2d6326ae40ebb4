"""A real ``Worker`` without a broker: an in-memory cluster whose consumers and producers implement the
part of confluent-kafka's API the runtime uses, for fast tests of a service's logic (as Bytewax's
``testing`` module does). The records are real ``confluent_kafka.Message`` objects, so the worker runs
exactly its production code, the compiled decoder and dead-letter loop included.

    cluster = InMemoryCluster()
    cluster.create_topic("in", partitions=2)
    cluster.produce("in", b'{"relation": ...}', key=b"k")
    worker = Worker(service, config, cluster, MemoryStore())
    run_to_end(worker)                  # consumed everything, checkpointed, left the group
    cluster.values("out")               # the published results

Kept simple on purpose: a group has one member at a time (it is given every partition of the topic it
subscribes to), deliveries always succeed, and there are no transactions. A crash is an exception
raised from a hook or ``until``: the worker then writes nothing, and a new worker on the same store
resumes from its last checkpoint. Real-broker behaviour (rebalances between members, outages) stays
with the embedded-broker suites."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Message, TopicPartition

from ivmstream.partitioner import partition_for
from ivmstream.runtime.clients import Consumer, Producer

Headers = list[tuple[str, str | bytes | None]] | None


@dataclass
class _TopicMeta:
    partitions: dict[int, None]
    error: None = None


@dataclass
class _ClusterMeta:
    topics: dict[str, _TopicMeta] = field(default_factory=dict)


class InMemoryCluster:
    """Topics as lists of records per partition, and the groups' committed offsets. Also the client
    factory a ``Worker`` takes (``ivmstream.runtime.clients.ClientFactory``)."""

    bootstrap = "in-memory"

    def __init__(self, auto_create_partitions: int = 1) -> None:
        """``auto_create_partitions``: the partitions of a topic first named by a producer."""
        self.logs: dict[str, list[list[Message]]] = {}
        self.low: dict[tuple[str, int], int] = {}  # first offset still held (records deleted before it)
        self.committed: dict[tuple[str, str, int], int] = {}
        self.auto_create_partitions = auto_create_partitions

    # --- topics ------------------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        if topic not in self.logs:
            self.logs[topic] = [[] for _ in range(partitions)]

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int = -1,
        headers: Headers = None,
    ) -> Message:
        """Append one record: to ``partition``, or where Kafka's default partitioner puts ``key`` (no key:
        partition 0)."""
        self.create_topic(topic, self.auto_create_partitions)
        parts = self.logs[topic]
        if partition < 0:
            partition = partition_for(key, len(parts)) if key is not None else 0
        log = parts[partition]
        msg = Message(
            topic=topic,
            partition=partition,
            offset=len(log),
            key=key,
            value=value,
            headers=headers,
            error=None,
        )
        log.append(msg)
        return msg

    def messages(self, topic: str, partition: int | None = None) -> list[Message]:
        """The records of ``topic`` (of one partition, or of every partition in partition order)."""
        parts = self.logs.get(topic, [])
        if partition is not None:
            return list(parts[partition]) if partition < len(parts) else []
        return [m for log in parts for m in log]

    def values(self, topic: str, partition: int | None = None) -> list[bytes | None]:
        return [m.value() for m in self.messages(topic, partition)]

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(log) for p, log in enumerate(self.logs.get(topic, []))}

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Retention: the records of ``topic:partition`` before ``offset`` are gone."""
        self.low[(topic, partition)] = offset

    # --- the client factory ------------------------------------------------------------------------

    def consumer(
        self, group: str, session_timeout_ms: int = 0, overrides: Mapping[str, Any] | None = None
    ) -> Consumer:  # typed as the runtime's protocol, so mypy checks that the two agree
        return InMemoryConsumer(self, group)

    def producer(self, overrides: Mapping[str, Any] | None = None) -> Producer:
        return InMemoryProducer(self)


class InMemoryConsumer:
    """A consumer of an ``InMemoryCluster``: subscription (the one member of its group), manual
    assignment, consume, commits and the metadata calls the runtime makes."""

    def __init__(self, cluster: InMemoryCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.positions: dict[tuple[str, int], int] = {}
        self._subscribed: list[str] = []
        self._callbacks: dict[str, Callable[..., None] | None] = {}
        self._pending = False  # subscribed, partitions not yet handed to on_assign
        self._owned: list[TopicPartition] = []
        self._turn = 0  # the partition a batch is taken from first

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callable[..., None] | None = None,
        on_revoke: Callable[..., None] | None = None,
        on_lost: Callable[..., None] | None = None,
    ) -> None:
        self._subscribed = list(topics)
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._pending = True

    def _join(self) -> None:
        """As a rebalance does inside ``consume``: every partition of the subscribed topics is assigned."""
        self._pending = False
        self._owned = [
            TopicPartition(t, p) for t in self._subscribed for p in range(len(self.cluster.logs.get(t, [])))
        ]
        on_assign = self._callbacks.get("assign")
        if on_assign is not None:
            on_assign(self, list(self._owned))
        else:
            self.assign(self._owned)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read ``partitions`` from their offsets: a logical one (beginning, end, stored) as Kafka
        resolves it."""
        cluster = self.cluster
        for tp in partitions:
            key, offset = (tp.topic, tp.partition), tp.offset
            if offset == OFFSET_BEGINNING:
                offset = cluster.low.get(key, 0)
            elif offset == OFFSET_END:
                offset = len(cluster.logs[tp.topic][tp.partition])
            elif offset < 0:
                offset = cluster.committed.get((self.group, *key), cluster.low.get(key, 0))
            self.positions[key] = offset

    def unassign(self) -> None:
        self.positions.clear()

    def seek(self, partition: TopicPartition) -> None:
        self.positions[(partition.topic, partition.partition)] = partition.offset

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        if self._pending:
            self._join()
        owned = list(self.positions)
        for i in range(len(owned)):  # one partition per batch, as a fetch usually returns, in turn
            topic, partition = where = owned[(self._turn + i) % len(owned)]
            position = self.positions[where]
            if position < self.cluster.low.get(where, 0):
                raise RuntimeError(
                    f"{topic}:{partition}: offset {position} deleted (auto.offset.reset error)"
                )
            taken = self.cluster.logs[topic][partition][position : position + num_messages]
            if taken:
                self.positions[where] = position + len(taken)
                self._turn = (self._turn + i + 1) % len(owned)
                return taken
        return []

    def commit(
        self, *, offsets: list[TopicPartition] | None = None, asynchronous: bool = True
    ) -> list[TopicPartition]:
        done = []
        for tp in offsets or []:
            self.cluster.committed[(self.group, tp.topic, tp.partition)] = tp.offset
            done.append(TopicPartition(tp.topic, tp.partition, tp.offset))
        return done

    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.cluster.committed.get((self.group, tp.topic, tp.partition), -1001),
            )
            for tp in partitions
        ]

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float = -1) -> tuple[int, int]:
        key = (partition.topic, partition.partition)
        return self.cluster.low.get(key, 0), len(self.cluster.logs[partition.topic][partition.partition])

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _ClusterMeta:
        names = [topic] if topic is not None and topic in self.cluster.logs else list(self.cluster.logs)
        return _ClusterMeta({t: _TopicMeta(dict.fromkeys(range(len(self.cluster.logs[t])))) for t in names})

    def close(self) -> None:
        """Leave the group: the owned partitions are revoked first, as in a clean shutdown."""
        on_revoke = self._callbacks.get("revoke")
        if self._owned and on_revoke is not None:
            on_revoke(self, list(self._owned))
        self._owned = []
        self.positions.clear()


class InMemoryProducer:
    """A producer into an ``InMemoryCluster``: every record is delivered at once, so no delivery report
    (the runtime asks for failures only) is ever due."""

    def __init__(self, cluster: InMemoryCluster) -> None:
        self.cluster = cluster

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Any = None,
        callback: Any = None,
        timestamp: int = 0,
        headers: Headers = None,
    ) -> None:
        self.cluster.produce(topic, value, key, partition, headers)

    def poll(self, timeout: float = -1) -> int:
        return 0

    def flush(self, timeout: float = -1) -> int:
        return 0

    def __len__(self) -> int:
        return 0


def run_to_end(
    worker: Any, ends: Mapping[int, int] | None = None, until: Callable[[Any], bool] | None = None
) -> None:
    """Run ``worker`` (over an ``InMemoryCluster``) until it has applied its input topic up to ``ends``
    (default: its end now), or ``until(worker)`` is true first; it then checkpoints and leaves."""
    cluster = worker.clients
    assert isinstance(cluster, InMemoryCluster), "run_to_end runs a worker over an InMemoryCluster"
    topic = worker.config.input_topic
    targets = dict(ends) if ends is not None else cluster.end_offsets(topic)
    low = {p: cluster.low.get((topic, p), 0) for p in targets}

    def done(w: Any) -> bool:
        if until is not None and until(w):
            return True
        positions = w.positions()
        return all((positions.get(p) or low[p]) >= end for p, end in targets.items())

    worker.run(until=done)
