"""The state of one assigned input partition: an engine per partition key and the next offset."""

from __future__ import annotations

from collections.abc import Callable

from shared.engine import Engine
from shared.state import PartitionCheckpoint


class PartitionState:
    def __init__(self, topic: str, partition: int, factory: Callable[[], Engine], cp: PartitionCheckpoint):
        self.topic = topic
        self.partition = partition
        self._factory = factory
        self.engines: dict[str, Engine] = {}
        for key, snap in cp.snapshots.items():
            engine = factory()
            engine.restore(snap)
            self.engines[key] = engine
        self.next_offset: int | None = cp.offset  # None until the first record is consumed
        self.committed_offset: int | None = cp.offset  # what the state store holds
        self.group_offset: int | None = None  # what the consumer group holds, once we committed it
        self.dirty: set[str] = set()

    def engine(self, key: str) -> Engine:
        engine = self.engines.get(key)
        if engine is None:
            engine = self.engines[key] = self._factory()
        return engine

    @property
    def needs_checkpoint(self) -> bool:
        return bool(self.dirty) or self.next_offset != self.committed_offset

    def take_changes(self) -> dict[str, bytes]:
        """Snapshots of the engines changed since the last checkpoint."""
        changes = {key: self.engines[key].snapshot() for key in self.dirty}
        self.dirty.clear()
        return changes

    @property
    def label(self) -> str:
        return f"{self.topic}:{self.partition}"
