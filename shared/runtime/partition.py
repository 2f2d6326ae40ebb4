"""The state of one assigned input partition: an engine per partition key and the next offset."""

from __future__ import annotations

from collections.abc import Callable

from shared.engine import Engine, is_incremental
from shared.state import PartitionCheckpoint, StateChanges, StateError


class PartitionState:
    def __init__(
        self,
        topic: str,
        partition: int,
        factory: Callable[[], Engine],
        cp: PartitionCheckpoint,
        incremental: bool = True,
    ):
        self.topic = topic
        self._use_entries = incremental  # False: whole snapshots even for incremental engines
        self.partition = partition
        self._factory = factory
        self.engines: dict[str, Engine] = {}
        self._incremental: set[str] = set()  # keys checkpointed as entries
        self._rewrite: set[str] = set()  # incremental keys restored from a whole snapshot
        for key, snap in cp.snapshots.items():
            engine = factory()
            engine.restore(snap)
            self._add(key, engine)
            if key in self._incremental:
                self._rewrite.add(key)
        for key, entries in cp.entries.items():
            engine = factory()
            if not is_incremental(engine):
                raise StateError(
                    f"{self.label}: key {key!r} is stored as entries, but this engine keeps none"
                )
            engine.restore_entries(entries)  # type: ignore[attr-defined]
            self._add(key, engine)
        self.next_offset: int | None = cp.offset  # None until the first record is consumed
        self.committed_offset: int | None = cp.offset  # what the state store holds
        self.group_offset: int | None = None  # what the consumer group holds, once we committed it
        self.dirty: set[str] = set(self._rewrite)

    def _add(self, key: str, engine: Engine) -> Engine:
        self.engines[key] = engine
        if self._use_entries and is_incremental(engine):
            self._incremental.add(key)
        return engine

    def engine(self, key: str) -> Engine:
        engine = self.engines.get(key)
        if engine is None:
            engine = self._add(key, self._factory())
        return engine

    @property
    def needs_checkpoint(self) -> bool:
        return bool(self.dirty) or self.next_offset != self.committed_offset

    def take_changes(self) -> StateChanges:
        """What changed since the last checkpoint: entries of incremental engines, else snapshots."""
        changes = StateChanges()
        for key in self.dirty:
            engine = self.engines[key]
            if key not in self._incremental:
                changes.snapshots[key] = engine.snapshot()
            elif key in self._rewrite:
                engine.changed_entries()  # type: ignore[attr-defined]  # all of them follow instead
                changes.entries[key] = list(engine.all_entries())  # type: ignore[attr-defined]
                changes.drop_snapshots.add(key)
            else:
                changes.entries[key] = engine.changed_entries()  # type: ignore[attr-defined]
        self._rewrite.clear()
        self.dirty.clear()
        return changes

    @property
    def label(self) -> str:
        return f"{self.topic}:{self.partition}"
