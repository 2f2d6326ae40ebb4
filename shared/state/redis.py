"""Redis state store: one hash per input partition, committed with MULTI/EXEC.

Shared by every worker that can reach the server, so partitions move between hosts freely. Each
hash holds the per-key snapshots and the next offset; a checkpoint is one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis

from shared.state.base import PartitionCheckpoint, StateError

_OFFSET = b"\x00offset"
_SNAP = b"k:"


class RedisStore:
    name = "redis"

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def _hash(self, topic: str, partition: int) -> str:
        return f"ivmstream:state:{self.namespace}:{topic}:{partition}"

    def load(self, topic: str, partition: int) -> PartitionCheckpoint:
        try:
            fields = self.client.hgetall(self._hash(topic, partition))
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None
        raw = fields.pop(_OFFSET, None)
        snapshots = {k[len(_SNAP) :].decode(): v for k, v in fields.items() if k.startswith(_SNAP)}
        return PartitionCheckpoint(int(raw) if raw is not None else None, snapshots)

    def commit(self, topic: str, partition: int, offset: int, changes: Mapping[str, bytes]) -> int:
        mapping: dict[bytes, bytes] = {_SNAP + k.encode(): v for k, v in changes.items()}
        mapping[_OFFSET] = str(offset).encode()
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self._hash(topic, partition), mapping=mapping)
        try:
            pipe.execute()
        except redis.RedisError as exc:
            raise StateError(f"checkpoint to Redis failed: {exc}") from None
        return sum(len(v) for v in changes.values())

    def release(self, topic: str, partition: int) -> None:
        pass

    def close(self) -> None:
        pass
