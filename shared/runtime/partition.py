"""The state of one assigned input partition: an engine per partition key and the next offset (and,
for a sharded query, the next broadcast offset its state covers)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from shared.engine import Engine, StoredMap, is_incremental, store_backed_maps
from shared.state import PartitionCheckpoint, StateChanges, StateError, StateStore
from shared.state.base import EntryReader


def store_backing(store: StateStore, probe: Engine, incremental: bool) -> frozenset[str]:
    """The maps this service's engines read through the store (``probe`` is one of them); checked once at
    start, so a store that cannot serve single entries is refused before anything is consumed. With
    whole snapshots (``incremental`` false) everything stays resident."""
    maps = store_backed_maps(probe) if incremental else frozenset()
    if maps and not isinstance(store, EntryReader):
        raise StateError(
            f"state store {store.name} cannot back map {', '.join(sorted(maps))} of this engine in the "
            "store (it cannot read single entries): use the rocksdb, redis or memory backend, or the "
            "engine option that keeps its state resident"
        )
    return maps


class PartitionState:
    def __init__(
        self,
        topic: str,
        partition: int,
        factory: Callable[[], Engine],
        cp: PartitionCheckpoint,
        incremental: bool = True,
        store: EntryReader | None = None,
        backed: frozenset[str] = frozenset(),
    ):
        """``backed``: maps (``store_backing``) each engine reads through ``store``; ``cp`` must have been
        loaded without them."""
        if backed and store is None:
            raise ValueError("store-backed maps need the store that backs them")
        self._store = store
        self._backed = backed
        self.topic = topic
        self._use_entries = incremental  # False: whole snapshots even for incremental engines
        self.partition = partition
        self._factory = factory
        self.engines: dict[str, Engine] = {}
        self._incremental: set[str] = set()  # keys checkpointed as entries
        self._rewrite: set[str] = set()  # incremental keys restored from a whole snapshot
        for key, snap in cp.snapshots.items():
            engine = self._new_engine(key)
            engine.restore(snap)
            self._add(key, engine)
            if key in self._incremental:
                self._rewrite.add(key)
        for key, entries in cp.entries.items():
            engine = self._new_engine(key)
            if not is_incremental(engine):
                raise StateError(
                    f"{self.label}: key {key!r} is stored as entries, but this engine keeps none"
                )
            engine.restore_entries(entries)  # type: ignore[attr-defined]
            self._add(key, engine)
        self.next_offset: int | None = cp.offset  # None until the first record is consumed
        self.committed_offset: int | None = cp.offset  # what the state store holds
        self.group_offset: int | None = None  # what the consumer group holds, once we committed it
        # sharded query: the broadcast records before this offset are applied (shared/runtime/broadcast.py)
        self.broadcast_next: int | None = cp.broadcast_offset
        self.committed_broadcast: int | None = cp.broadcast_offset  # what the state store holds
        self.dirty: set[str] = set(self._rewrite)

    def _new_engine(self, key: str) -> Engine:
        """A fresh engine for ``key``, its store-backed maps bound to this partition's stored entries."""
        engine = self._factory()
        store = self._store
        if self._backed and store is not None:
            t, p = self.topic, self.partition
            engine.attach_stored_maps(  # type: ignore[attr-defined]
                {
                    m: StoredMap(
                        partial(store.get_entry, t, p, key, m), partial(store.scan_entries, t, p, key, m)
                    )
                    for m in self._backed
                }
            )
        return engine

    def _add(self, key: str, engine: Engine) -> Engine:
        self.engines[key] = engine
        if self._use_entries and is_incremental(engine):
            self._incremental.add(key)
        return engine

    def engine(self, key: str) -> Engine:
        engine = self.engines.get(key)
        if engine is None:
            engine = self._add(key, self._new_engine(key))
        return engine

    @property
    def needs_checkpoint(self) -> bool:
        return (
            bool(self.dirty)
            or self.next_offset != self.committed_offset
            or self.broadcast_next != self.committed_broadcast
        )

    def take_changes(self) -> StateChanges:
        """What changed since the last checkpoint: entries of incremental engines, else snapshots."""
        changes = StateChanges()
        for key in self.dirty:
            engine = self.engines[key]
            if key not in self._incremental:
                changes.snapshots[key] = engine.snapshot()
                if is_incremental(engine):  # it logs its changes anyway: drop them, or the log grows
                    engine.changed_entries()  # type: ignore[attr-defined]
            elif key in self._rewrite:
                # all of them, then an empty change log (a store-backed map reads what it had not
                # handed out, so all_entries() comes first)
                changes.entries[key] = list(engine.all_entries())  # type: ignore[attr-defined]
                engine.changed_entries()  # type: ignore[attr-defined]
                changes.drop_snapshots.add(key)
            else:
                changes.entries[key] = engine.changed_entries()  # type: ignore[attr-defined]
        self._rewrite.clear()
        self.dirty.clear()
        changes.broadcast_offset = self.broadcast_next
        return changes

    @property
    def label(self) -> str:
        return f"{self.topic}:{self.partition}"
