"""In-process state store: for replay, tests and throwaway runs (lost when the process exits)."""

from __future__ import annotations

from collections.abc import Mapping

from shared.state.base import PartitionCheckpoint


class MemoryStore:
    name = "memory"

    def __init__(self) -> None:
        self._data: dict[tuple[str, int], PartitionCheckpoint] = {}

    def load(self, topic: str, partition: int) -> PartitionCheckpoint:
        cp = self._data.get((topic, partition))
        return PartitionCheckpoint(cp.offset, dict(cp.snapshots)) if cp else PartitionCheckpoint()

    def commit(self, topic: str, partition: int, offset: int, changes: Mapping[str, bytes]) -> int:
        cp = self._data.setdefault((topic, partition), PartitionCheckpoint())
        cp.snapshots.update(changes)
        cp.offset = offset
        return sum(len(v) for v in changes.values())

    def release(self, topic: str, partition: int) -> None:
        pass

    def close(self) -> None:
        pass
