"""Redis state store: per input partition, one hash of offset, envelope and whole snapshots, and one
hash per key of its map entries; a checkpoint is one MULTI/EXEC transaction.

Shared by every worker that can reach the server, so partitions move between hosts freely. A set
per partition lists the keys that have entry hashes, so a restore reads exactly those.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import redis

from shared.engine import Entry
from shared.state.base import (
    BROADCAST_OFFSET_KEY,
    ENVELOPE_KEY,
    OFFSET_KEY,
    SNAPSHOT_PREFIX,
    CommitStats,
    FaultHook,
    PartitionCheckpoint,
    StateChanges,
    StateError,
)

_SCAN_COUNT = 10_000


class RedisStore:
    name = "redis"

    def __init__(self, client: redis.Redis, namespace: str, fault_hook: FaultHook | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self._fault = fault_hook or (lambda _point: None)

    def _hash(self, topic: str, partition: int) -> str:
        return f"ivmstream:state:{self.namespace}:{topic}:{partition}"

    def _keys_set(self, topic: str, partition: int) -> str:
        return self._hash(topic, partition) + ":entry-keys"

    def _entries_hash(self, topic: str, partition: int, key: str) -> bytes:
        return (self._hash(topic, partition) + ":e:").encode() + key.encode()

    @staticmethod
    def _field(map_name: str, entry: bytes) -> bytes:
        return map_name.encode() + b"\x00" + entry

    def load(self, topic: str, partition: int, skip_maps: Collection[str] = ()) -> PartitionCheckpoint:
        skip = {m.encode() for m in skip_maps}
        try:
            fields = self.client.hgetall(self._hash(topic, partition))
            keys = sorted(k.decode() for k in self.client.smembers(self._keys_set(topic, partition)))
            entries = {key: list(self._scan_entries(topic, partition, key, skip)) for key in keys}
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None
        raw = fields.pop(OFFSET_KEY, None)
        envelope = fields.pop(ENVELOPE_KEY, None)
        broadcast = fields.pop(BROADCAST_OFFSET_KEY, None)
        snapshots = {
            k[len(SNAPSHOT_PREFIX) :].decode(): v for k, v in fields.items() if k.startswith(SNAPSHOT_PREFIX)
        }
        return PartitionCheckpoint(
            int(raw) if raw is not None else None,
            snapshots,
            {k: v for k, v in entries.items() if v},
            envelope,
            int(broadcast) if broadcast is not None else None,
        )

    def load_header(self, topic: str, partition: int) -> PartitionCheckpoint:
        try:
            raw, envelope, broadcast = self.client.hmget(
                self._hash(topic, partition), [OFFSET_KEY, ENVELOPE_KEY, BROADCAST_OFFSET_KEY]
            )
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None
        return PartitionCheckpoint(
            int(raw) if raw is not None else None,
            envelope=envelope,
            broadcast_offset=int(broadcast) if broadcast is not None else None,
        )

    def stored_keys(self, topic: str, partition: int) -> list[str]:
        """Keys with a snapshot field in the partition's hash, and the keys of the entry-key set (a key
        whose entries were all deleted may stay listed: it then loads as empty)."""
        try:
            fields = self.client.hkeys(self._hash(topic, partition))
            listed = self.client.smembers(self._keys_set(topic, partition))
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None
        keys = {f[len(SNAPSHOT_PREFIX) :].decode() for f in fields if f.startswith(SNAPSHOT_PREFIX)}
        return sorted(keys | {k.decode() for k in listed})

    def load_key(
        self, topic: str, partition: int, key: str, skip_maps: Collection[str] = ()
    ) -> tuple[bytes | None, list[Entry]]:
        skip = {m.encode() for m in skip_maps}
        try:
            snapshot = self.client.hget(self._hash(topic, partition), SNAPSHOT_PREFIX + key.encode())
            entries = dict.fromkeys(self._scan_entries(topic, partition, key, skip))  # HSCAN may repeat
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None
        return snapshot, sorted(entries)

    def _scan_entries(
        self, topic: str, partition: int, key: str, skip: Collection[bytes] = ()
    ) -> Iterator[tuple[str, bytes, bytes]]:
        """A key's entries, page by page; those of the maps in ``skip`` are dropped as each page arrives."""
        for f, v in self.client.hscan_iter(self._entries_hash(topic, partition, key), count=_SCAN_COUNT):
            sep = f.index(b"\x00")
            if skip and f[:sep] in skip:
                continue
            yield f[:sep].decode(), f[sep + 1 :], v

    def commit(
        self, topic: str, partition: int, offset: int, changes: StateChanges, envelope: bytes
    ) -> CommitStats:
        main = self._hash(topic, partition)
        pipe = self.client.pipeline(transaction=True)
        size = 0
        if changes.drop_snapshots:
            pipe.hdel(main, *(SNAPSHOT_PREFIX + k.encode() for k in changes.drop_snapshots))
        mapping: dict[bytes, bytes] = {SNAPSHOT_PREFIX + k.encode(): v for k, v in changes.snapshots.items()}
        size += sum(len(v) for v in changes.snapshots.values())
        mapping[OFFSET_KEY] = str(offset).encode()
        mapping[ENVELOPE_KEY] = envelope
        if changes.broadcast_offset is not None:
            mapping[BROADCAST_OFFSET_KEY] = str(changes.broadcast_offset).encode()
        if changes.entries:
            pipe.sadd(self._keys_set(topic, partition), *changes.entries)
        for key, items in changes.entries.items():
            h = self._entries_hash(topic, partition, key)
            puts: dict[bytes, bytes] = {}
            deletes: list[bytes] = []
            for map_name, entry, value in items:
                f = self._field(map_name, entry)
                if value is None:
                    puts.pop(f, None)
                    deletes.append(f)
                else:
                    puts[f] = value
                    size += len(f) + len(value)
            # the transaction deletes first, then puts: a later change of the same entry wins either way
            if deletes:
                pipe.hdel(h, *deletes)
            if puts:
                pipe.hset(h, mapping=puts)
        pipe.hset(main, mapping=mapping)
        self._fault("checkpoint-staged")  # tests: a crash here must leave the previous checkpoint whole
        try:
            pipe.execute()
        except redis.RedisError as exc:
            raise StateError(f"checkpoint to Redis failed: {exc}") from None
        return CommitStats(size, changes.entry_count)

    def get_entry(self, topic: str, partition: int, key: str, map_name: str, entry: bytes) -> bytes | None:
        """One stored entry, for maps an engine keeps in the store rather than in memory."""
        try:
            return self.client.hget(self._entries_hash(topic, partition, key), self._field(map_name, entry))
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None

    def scan_entries(
        self, topic: str, partition: int, key: str, map_name: str
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every stored entry of one map of one key (HSCAN of the key's hash, matching the map's fields)."""
        field_prefix = self._field(map_name, b"")
        pattern = _glob_escape(field_prefix) + b"*"
        seen: set[bytes] = set()
        try:
            for f, v in self.client.hscan_iter(
                self._entries_hash(topic, partition, key), match=pattern, count=_SCAN_COUNT
            ):
                if f.startswith(field_prefix) and f not in seen:  # HSCAN may repeat a field
                    seen.add(f)
                    yield f[len(field_prefix) :], v
        except redis.RedisError as exc:
            raise StateError(f"cannot read state from Redis: {exc}") from None

    def size_bytes(self, topic: str, partition: int) -> int | None:
        try:
            names = [self._hash(topic, partition).encode()] + [
                self._entries_hash(topic, partition, k.decode())
                for k in self.client.smembers(self._keys_set(topic, partition))
            ]
            return sum(self.client.memory_usage(n) or 0 for n in names)
        except redis.RedisError:
            return None

    def release(self, topic: str, partition: int) -> None:
        pass

    def close(self) -> None:
        pass


def _glob_escape(raw: bytes) -> bytes:
    """``raw`` as a literal in a Redis glob pattern."""
    out = bytearray()
    for b in raw:
        if b in b"*?[]\\":
            out += b"\\"
        out.append(b)
    return bytes(out)
