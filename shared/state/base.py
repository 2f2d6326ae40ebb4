"""State stores: where engine state and the input offset it covers are checkpointed together.

The contract that makes exactly-once state possible: ``commit`` writes a partition's state changes
AND its next input offset in one atomic write, so after any crash the stored state covers exactly
the events before the stored offset. Nothing else in the system decides where to resume.

A key's state is stored in one of two layouts: a whole snapshot (engines with only
``snapshot()/restore()``), or named maps of entries that each checkpoint updates by what changed
(``ivmstream.engine.IncrementalEngine``). Every partition also stores the envelope of whoever wrote it
(``ivmstream.state.envelope``), checked before anything is restored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ivmstream.engine import Entry, EntryChange

FaultHook = Callable[[str], None]


class StateError(RuntimeError):
    """A state backend is unreachable, holds something unreadable, or was written by another engine."""


class StateLost(StateError):
    """The stored state is not the one checkpointed (a store that lost its data, a second writer): it
    must be neither written over nor silently rebuilt."""


@dataclass
class PartitionCheckpoint:
    """What a store holds for one input partition."""

    offset: int | None = None  # None: nothing checkpointed yet, start from the earliest offset
    snapshots: dict[str, bytes] = field(default_factory=dict)  # key -> whole snapshot
    entries: dict[str, list[Entry]] = field(default_factory=dict)  # key -> its map entries
    envelope: bytes | None = None  # as stored; compared by the caller
    # next offset of the broadcast partition a sharded query's partition applied (None: none applied)
    broadcast_offset: int | None = None
    # a re-keyed view's partition: the last origin record applied per origin partition (runtime.rekey)
    origins: bytes | None = None

    @property
    def empty(self) -> bool:
        return (
            self.offset is None
            and self.broadcast_offset is None
            and self.origins is None
            and not self.snapshots
            and not self.entries
        )


@dataclass
class StateChanges:
    """One partition's changes since its previous checkpoint."""

    snapshots: dict[str, bytes] = field(default_factory=dict)  # keys stored whole
    entries: dict[str, list[EntryChange]] = field(default_factory=dict)  # keys stored as entries
    drop_snapshots: set[str] = field(default_factory=set)  # keys moving from a snapshot to entries
    # a sharded query's partition: the next broadcast offset its state covers, written with the rest
    broadcast_offset: int | None = None
    # a re-keyed view's partition: its origin marks, when they moved (written with the rest)
    origins: bytes | None = None

    @property
    def entry_count(self) -> int:
        return len(self.snapshots) + sum(len(c) for c in self.entries.values())


@dataclass(frozen=True)
class CommitStats:
    bytes: int  # bytes of keys and values written
    entries: int  # puts and deletes written (a whole snapshot counts as one)


class StateStore(Protocol):
    name: str

    def load(self, topic: str, partition: int, skip_maps: Collection[str] = ()) -> PartitionCheckpoint:
        """Everything stored for the partition, except the entries of the maps named in ``skip_maps``
        (maps engines read through the store instead: see ``EntryReader``)."""
        ...

    def commit(
        self, topic: str, partition: int, offset: int, changes: StateChanges, envelope: bytes
    ) -> CommitStats:
        """Atomically store the changes, the envelope and the next offset (and ``changes.broadcast_offset``
        and ``changes.origins`` when given)."""
        ...

    def size_bytes(self, topic: str, partition: int) -> int | None:
        """The stored state's size as the backend estimates it (None: unknown)."""
        ...

    def release(self, topic: str, partition: int) -> None:
        """The partition was revoked: free per-partition resources (files, locks)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class EntryReader(Protocol):
    """Optional: a store that serves single entries and one map's entries, so an engine can keep a map
    in the store instead of in memory (``ivmstream.engine.StoreBackedEngine``)."""

    name: str

    def get_entry(self, topic: str, partition: int, key: str, map_name: str, entry: bytes) -> bytes | None:
        """One committed entry (None: absent)."""
        ...

    def scan_entries(
        self, topic: str, partition: int, key: str, map_name: str
    ) -> Iterator[tuple[bytes, bytes]]:
        """Every committed ``(entry, value)`` of one map of one key."""
        ...


# A worker's RocksDB memory, shared by all its partition databases (runtime options of the same names).
ROCKSDB_BLOCK_CACHE_MIB = 32
ROCKSDB_WRITE_BUFFER_MIB = 32


@runtime_checkable
class MemoryBounded(Protocol):
    """Optional: a store whose own memory (caches, write buffers) is bounded by sizes the runtime sets, so
    a worker's memory stays flat however much state its partitions store."""

    name: str

    def set_memory(self, block_cache_bytes: int, write_buffer_bytes: int) -> None:
        """Bound the store's caches and unflushed writes, for databases open now and opened later."""
        ...


@runtime_checkable
class KeyLoader(Protocol):
    """Optional: a store that reads a partition's keys one at a time, so a partition keeps only a bounded
    number of engines resident and loads the others when their key is next seen
    (``ivmstream.runtime.partition.PartitionState``)."""

    name: str

    def load_header(self, topic: str, partition: int) -> PartitionCheckpoint:
        """The offsets and the envelope, no key's state."""
        ...

    def stored_keys(self, topic: str, partition: int) -> list[str]:
        """Every key that has stored state (a snapshot or entries), sorted."""
        ...

    def has_keys(self, topic: str, partition: int, keys: Sequence[str]) -> list[bool]:
        """Whether each key has stored state, as ``stored_keys`` would list it: point lookups (one round
        trip for a remote store), so a partition need not hold an index of every stored key."""
        ...

    def count_keys(self, topic: str, partition: int) -> int:
        """How many keys ``stored_keys`` would list, counted without holding them."""
        ...

    def load_key(
        self, topic: str, partition: int, key: str, skip_maps: Collection[str] = ()
    ) -> tuple[bytes | None, list[Entry]]:
        """One key's whole snapshot (None: it has none) and its entries, leaving out ``skip_maps``."""
        ...


# --- the key layout every backend shares ------------------------------------------------------------

OFFSET_KEY = b"\x00offset"
BROADCAST_OFFSET_KEY = b"\x00broadcast-offset"  # only in the state of a sharded query's partition
ORIGINS_KEY = b"\x00origins"  # only in the state of a re-keyed view's partition
ENVELOPE_KEY = b"\x00envelope"
SNAPSHOT_PREFIX = b"k:"
ENTRY_PREFIX = b"e:"


def entry_prefix(key: str) -> bytes:
    """``e:`` + the key's length and bytes: one key's entries sort together, whatever bytes it holds."""
    raw = key.encode()
    return ENTRY_PREFIX + len(raw).to_bytes(4, "big") + raw


def entry_key(prefix: bytes, map_name: str, entry: bytes) -> bytes:
    return prefix + map_name.encode() + b"\x00" + entry


def split_entry_key(stored: bytes) -> tuple[str, str, bytes]:
    """(key, map name, entry key) of a stored ``e:`` key."""
    n = int.from_bytes(stored[2:6], "big")
    key = stored[6 : 6 + n].decode()
    rest = stored[6 + n :]
    sep = rest.index(b"\x00")
    return key, rest[:sep].decode(), rest[sep + 1 :]


def group_entries(
    rows: Iterable[tuple[bytes, bytes]], skip_maps: Collection[str] = ()
) -> dict[str, list[Entry]]:
    """Stored ``(e:-key, value)`` pairs (in any order) grouped into each key's entries, leaving out the
    maps named in ``skip_maps``."""
    out: dict[str, list[Entry]] = {}
    for stored, value in rows:
        key, map_name, entry = split_entry_key(stored)
        if map_name not in skip_maps:
            out.setdefault(key, []).append((map_name, entry, value))
    return out
