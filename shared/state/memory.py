"""In-process state store: for replay, tests and throwaway runs (lost when the process exits)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from ivmstream.engine import Entry
from ivmstream.state.base import CommitStats, PartitionCheckpoint, StateChanges


class _Partition:
    def __init__(self) -> None:
        self.offset: int | None = None
        self.broadcast_offset: int | None = None
        self.origins: bytes | None = None
        self.envelope: bytes | None = None
        self.snapshots: dict[str, bytes] = {}
        self.entries: dict[str, dict[tuple[str, bytes], bytes]] = {}


class MemoryStore:
    name = "memory"

    def __init__(self) -> None:
        self._data: dict[tuple[str, int], _Partition] = {}

    def load(self, topic: str, partition: int, skip_maps: Collection[str] = ()) -> PartitionCheckpoint:
        p = self._data.get((topic, partition))
        if p is None:
            return PartitionCheckpoint()
        entries = {}
        for key, maps in p.entries.items():
            kept = [(m, e, v) for (m, e), v in sorted(maps.items()) if m not in skip_maps]
            if kept:
                entries[key] = kept
        return PartitionCheckpoint(
            p.offset, dict(p.snapshots), entries, p.envelope, p.broadcast_offset, p.origins
        )

    def load_header(self, topic: str, partition: int) -> PartitionCheckpoint:
        p = self._data.get((topic, partition))
        return (
            PartitionCheckpoint()
            if p is None
            else PartitionCheckpoint(
                p.offset, envelope=p.envelope, broadcast_offset=p.broadcast_offset, origins=p.origins
            )
        )

    def stored_keys(self, topic: str, partition: int) -> list[str]:
        p = self._data.get((topic, partition))
        if p is None:
            return []
        return sorted(set(p.snapshots) | {k for k, maps in p.entries.items() if maps})

    def has_keys(self, topic: str, partition: int, keys: Sequence[str]) -> list[bool]:
        p = self._data.get((topic, partition))
        if p is None:
            return [False] * len(keys)
        return [key in p.snapshots or bool(p.entries.get(key)) for key in keys]

    def count_keys(self, topic: str, partition: int) -> int:
        p = self._data.get((topic, partition))
        if p is None:
            return 0
        return len(p.snapshots) + sum(1 for k, maps in p.entries.items() if maps and k not in p.snapshots)

    def load_key(
        self, topic: str, partition: int, key: str, skip_maps: Collection[str] = ()
    ) -> tuple[bytes | None, list[Entry]]:
        p = self._data.get((topic, partition))
        if p is None:
            return None, []
        maps = p.entries.get(key, {})
        return p.snapshots.get(key), [(m, e, v) for (m, e), v in sorted(maps.items()) if m not in skip_maps]

    def get_entry(self, topic: str, partition: int, key: str, map_name: str, entry: bytes) -> bytes | None:
        """One stored entry, for maps an engine keeps in the store rather than in memory."""
        p = self._data.get((topic, partition))
        maps = p.entries.get(key) if p is not None else None
        return None if maps is None else maps.get((map_name, entry))

    def scan_entries(
        self, topic: str, partition: int, key: str, map_name: str
    ) -> Iterator[tuple[bytes, bytes]]:
        p = self._data.get((topic, partition))
        maps = p.entries.get(key) if p is not None else None
        for (m, e), v in sorted((maps or {}).items()):
            if m == map_name:
                yield e, v

    def commit(
        self, topic: str, partition: int, offset: int, changes: StateChanges, envelope: bytes
    ) -> CommitStats:
        p = self._data.setdefault((topic, partition), _Partition())
        size = 0
        for key in changes.drop_snapshots:
            p.snapshots.pop(key, None)
        p.snapshots.update(changes.snapshots)
        size += sum(len(v) for v in changes.snapshots.values())
        for key, items in changes.entries.items():
            maps = p.entries.setdefault(key, {})
            for map_name, entry, value in items:
                if value is None:
                    maps.pop((map_name, entry), None)
                else:
                    maps[(map_name, entry)] = value
                    size += len(entry) + len(value)
        p.offset = offset
        if changes.broadcast_offset is not None:
            p.broadcast_offset = changes.broadcast_offset
        if changes.origins is not None:
            p.origins = changes.origins
        p.envelope = envelope
        return CommitStats(size, changes.entry_count)

    def size_bytes(self, topic: str, partition: int) -> int | None:
        p = self._data.get((topic, partition))
        if p is None:
            return 0
        return sum(len(v) for v in p.snapshots.values()) + sum(
            len(e) + len(v) for maps in p.entries.values() for (_m, e), v in maps.items()
        )

    def release(self, topic: str, partition: int) -> None:
        pass

    def close(self) -> None:
        pass
