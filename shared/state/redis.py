"""Redis state store: per input partition, one hash of offset, envelope and whole snapshots, and one
hash per key of its map entries; a checkpoint is one MULTI/EXEC transaction.

Shared by every worker that can reach the server, so partitions move between hosts freely. A set
per partition lists the keys that have entry hashes, so a restore reads exactly those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, TypeVar

import redis

from ivmstream.engine import Entry
from ivmstream.retry import with_retries
from ivmstream.state.base import (
    BROADCAST_OFFSET_KEY,
    ENVELOPE_KEY,
    OFFSET_KEY,
    ORIGINS_KEY,
    SNAPSHOT_PREFIX,
    CommitStats,
    FaultHook,
    PartitionCheckpoint,
    StateChanges,
    StateError,
    StateLost,
)

_SCAN_COUNT = 10_000
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)
_UNKNOWN = object()  # a partition this store has not read: nothing to compare a commit with
T = TypeVar("T")


def _lost(topic: str, partition: int, expected: int | None, stored: int | None) -> str:
    found = "no checkpoint at all" if stored is None else f"a checkpoint at offset {stored}"
    had = f"its checkpoint at offset {expected}" if expected is not None else "no checkpoint"
    return (
        f"the Redis state of {topic}:{partition} lost its data: this worker wrote {had} but Redis holds "
        f"{found} (restarted without persistence, flushed, or written by another worker); stopping "
        "without writing: rebuild the state with `ivmstream bootstrap`, or from the log under a new --group"
    )


class RedisStore:
    name = "redis"

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        fault_hook: FaultHook | None = None,
        retry_seconds: float = 30.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self._fault = fault_hook or (lambda _point: None)
        self.retry_seconds = retry_seconds
        # the offset each partition's state holds, as this store last read or wrote it: a commit finds
        # exactly that there, or the state changed behind this worker's back (docs/architecture.md,
        # "Redis outages")
        self._offsets: dict[tuple[str, int], int | None] = {}

    def _call(self, call: Callable[[], T], what: str) -> T:
        """``call()`` retried while Redis is unreachable (up to ``retry_seconds``); any Redis error left is
        a ``StateError``."""
        try:
            value, _failed = with_retries(
                call, what=what, retry_on=_UNREACHABLE, give_up_after=self.retry_seconds
            )
            return value
        except redis.RedisError as exc:
            raise StateError(f"cannot {what}: {exc}") from None

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

        def read() -> tuple[dict[bytes, bytes], dict[str, list[Entry]]]:
            fields = self.client.hgetall(self._hash(topic, partition))
            keys = sorted(k.decode() for k in self.client.smembers(self._keys_set(topic, partition)))
            return fields, {key: list(self._scan_entries(topic, partition, key, skip)) for key in keys}

        fields, entries = self._call(read, "read state from Redis")
        raw = fields.pop(OFFSET_KEY, None)
        envelope = fields.pop(ENVELOPE_KEY, None)
        broadcast = fields.pop(BROADCAST_OFFSET_KEY, None)
        origins = fields.pop(ORIGINS_KEY, None)
        snapshots = {
            k[len(SNAPSHOT_PREFIX) :].decode(): v for k, v in fields.items() if k.startswith(SNAPSHOT_PREFIX)
        }
        offset = int(raw) if raw is not None else None
        self._offsets[(topic, partition)] = offset
        return PartitionCheckpoint(
            offset,
            snapshots,
            {k: v for k, v in entries.items() if v},
            envelope,
            int(broadcast) if broadcast is not None else None,
            origins,
        )

    def load_header(self, topic: str, partition: int) -> PartitionCheckpoint:
        raw, envelope, broadcast, origins = self._call(
            lambda: self.client.hmget(
                self._hash(topic, partition), [OFFSET_KEY, ENVELOPE_KEY, BROADCAST_OFFSET_KEY, ORIGINS_KEY]
            ),
            "read state from Redis",
        )
        offset = int(raw) if raw is not None else None
        self._offsets[(topic, partition)] = offset
        return PartitionCheckpoint(
            offset,
            envelope=envelope,
            broadcast_offset=int(broadcast) if broadcast is not None else None,
            origins=origins,
        )

    def stored_keys(self, topic: str, partition: int) -> list[str]:
        """Keys with a snapshot field in the partition's hash, and the keys of the entry-key set (a key
        whose entries were all deleted may stay listed: it then loads as empty)."""
        fields, listed = self._call(
            lambda: (
                self.client.hkeys(self._hash(topic, partition)),
                self.client.smembers(self._keys_set(topic, partition)),
            ),
            "read state from Redis",
        )
        keys = {f[len(SNAPSHOT_PREFIX) :].decode() for f in fields if f.startswith(SNAPSHOT_PREFIX)}
        return sorted(keys | {k.decode() for k in listed})

    def has_keys(self, topic: str, partition: int, keys: Sequence[str]) -> list[bool]:
        """HEXISTS of the snapshot field and SISMEMBER of the entry-key set, per key, in one pipeline."""
        if not keys:
            return []
        main, listed = self._hash(topic, partition), self._keys_set(topic, partition)

        def read() -> list[Any]:
            with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hexists(main, SNAPSHOT_PREFIX + key.encode())
                    pipe.sismember(listed, key)
                return pipe.execute()

        found = self._call(read, "read state from Redis")
        return [bool(found[2 * i]) or bool(found[2 * i + 1]) for i in range(len(keys))]

    def count_keys(self, topic: str, partition: int) -> int:
        """The number of ``stored_keys`` (read at assignment only: the list is dropped once counted; HSCAN
        and SSCAN may repeat an element, so they cannot count)."""
        return len(self.stored_keys(topic, partition))

    def load_key(
        self, topic: str, partition: int, key: str, skip_maps: Collection[str] = ()
    ) -> tuple[bytes | None, list[Entry]]:
        skip = {m.encode() for m in skip_maps}
        snapshot, entries = self._call(
            lambda: (
                self.client.hget(self._hash(topic, partition), SNAPSHOT_PREFIX + key.encode()),
                dict.fromkeys(self._scan_entries(topic, partition, key, skip)),  # HSCAN may repeat
            ),
            "read state from Redis",
        )
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
        """One MULTI/EXEC under WATCH of the partition's hash, after checking that the stored offset is the
        one this store last read or wrote: a Redis that lost its data (restarted without persistence,
        flushed) or a second writer is refused instead of being written over (``StateLost``)."""
        main = self._hash(topic, partition)
        expected = self._offsets.get((topic, partition), _UNKNOWN)
        size = 0

        def attempt() -> bool:
            """True when written; False when an earlier attempt's EXEC already landed."""
            with self.client.pipeline(transaction=True) as pipe:
                pipe.watch(main)  # type: ignore[no-untyped-call]
                raw = pipe.hget(main, OFFSET_KEY)
                stored = int(raw) if raw is not None else None
                if expected is not _UNKNOWN and stored != expected:
                    if stored == offset:  # the reply of a commit that landed was lost with the connection
                        return False
                    raise StateLost(_lost(topic, partition, expected, stored))
                pipe.multi()
                self._stage(pipe, topic, partition, offset, changes, envelope)
                self._fault("checkpoint-staged")  # tests: a crash here must leave the previous one whole
                pipe.execute()
                return True

        try:
            self._call(attempt, f"checkpoint {topic}:{partition} to Redis")
        except redis.WatchError:
            raise StateLost(
                f"the Redis state of {topic}:{partition} changed while this worker was writing it: another "
                "worker writes the same partition (same --group and namespace); stopping without writing"
            ) from None
        self._offsets[(topic, partition)] = offset
        for snap in changes.snapshots.values():
            size += len(snap)
        for items in changes.entries.values():
            for map_name, entry, value in items:
                if value is not None:
                    size += len(self._field(map_name, entry)) + len(value)
        return CommitStats(size, changes.entry_count)

    def _stage(
        self, pipe: Any, topic: str, partition: int, offset: int, changes: StateChanges, envelope: bytes
    ) -> None:
        main = self._hash(topic, partition)
        if changes.drop_snapshots:
            pipe.hdel(main, *(SNAPSHOT_PREFIX + k.encode() for k in changes.drop_snapshots))
        mapping: dict[bytes, bytes] = {SNAPSHOT_PREFIX + k.encode(): v for k, v in changes.snapshots.items()}
        mapping[OFFSET_KEY] = str(offset).encode()
        mapping[ENVELOPE_KEY] = envelope
        if changes.broadcast_offset is not None:
            mapping[BROADCAST_OFFSET_KEY] = str(changes.broadcast_offset).encode()
        if changes.origins is not None:
            mapping[ORIGINS_KEY] = changes.origins
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
            # the transaction deletes first, then puts: a later change of the same entry wins either way
            if deletes:
                pipe.hdel(h, *deletes)
            if puts:
                pipe.hset(h, mapping=puts)
        pipe.hset(main, mapping=mapping)

    def get_entry(self, topic: str, partition: int, key: str, map_name: str, entry: bytes) -> bytes | None:
        """One stored entry, for maps an engine keeps in the store rather than in memory."""
        return self._call(
            lambda: self.client.hget(self._entries_hash(topic, partition, key), self._field(map_name, entry)),
            "read state from Redis",
        )

    def scan_entries(
        self, topic: str, partition: int, key: str, map_name: str
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every stored entry of one map of one key (HSCAN of the key's hash, matching the map's fields)."""
        field_prefix = self._field(map_name, b"")
        pattern = _glob_escape(field_prefix) + b"*"
        found = self._call(
            lambda: dict(
                self.client.hscan_iter(
                    self._entries_hash(topic, partition, key), match=pattern, count=_SCAN_COUNT
                )
            ),  # a dict: HSCAN may repeat a field
            "read state from Redis",
        )
        for f, v in found.items():
            if f.startswith(field_prefix):
                yield f[len(field_prefix) :], v

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
        self._offsets.pop((topic, partition), None)  # its next owner reads the offset again

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
