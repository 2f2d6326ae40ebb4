"""State stores: where engine snapshots and the input offsets they cover are checkpointed together.

The contract that makes exactly-once state possible: ``commit`` writes a partition's changed engine
snapshots AND its next input offset in one atomic write, so after any crash the stored state covers
exactly the events before the stored offset. Nothing else in the system decides where to resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class StateError(RuntimeError):
    """A state backend is unreachable or holds something unreadable."""


@dataclass
class PartitionCheckpoint:
    """What a store holds for one input partition: next offset to read and per-key snapshots."""

    offset: int | None = None  # None: nothing checkpointed yet, start from the earliest offset
    snapshots: dict[str, bytes] = field(default_factory=dict)


class StateStore(Protocol):
    name: str

    def load(self, topic: str, partition: int) -> PartitionCheckpoint: ...

    def commit(self, topic: str, partition: int, offset: int, changes: Mapping[str, bytes]) -> int:
        """Atomically store the changed snapshots and the next offset; returns bytes written."""
        ...

    def release(self, topic: str, partition: int) -> None:
        """The partition was revoked: free per-partition resources (files, locks)."""
        ...

    def close(self) -> None: ...
