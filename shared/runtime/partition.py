"""The state of one assigned input partition: an engine per partition key and the next offset (and,
for a sharded query, the next broadcast offset its state covers).

With ``resident_keys`` and a store that reads one key at a time (``KeyLoader``), at most that many
engines stay in memory after a checkpoint: the least recently used clean ones are dropped (their state
is exactly what the store holds) and restored from the store when their key is next seen. Engines
changed since the last checkpoint stay until it has written them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

from shared.engine import Engine, StoredMap, is_incremental, store_backed_maps
from shared.state import PartitionCheckpoint, StateChanges, StateError, StateStore
from shared.state.base import EntryReader, KeyLoader


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
        loader: KeyLoader | None = None,
        resident_keys: int | None = None,
    ):
        """``backed``: maps (``store_backing``) each engine reads through ``store``; ``cp`` must have been
        loaded without them. ``loader``: ``cp`` is only the header (``load_header``) and each stored key
        is read from ``loader`` when first needed; ``resident_keys`` then bounds the engines kept."""
        if backed and store is None:
            raise ValueError("store-backed maps need the store that backs them")
        if resident_keys is not None and loader is None:
            raise ValueError("a bound on resident engines needs a store that loads single keys")
        self._store = store
        self._backed = backed
        self.topic = topic
        self._use_entries = incremental  # False: whole snapshots even for incremental engines
        self.partition = partition
        self._factory = factory
        self.engines: OrderedDict[str, Engine] = OrderedDict()  # least recently used first
        self._loader = loader
        self._resident = resident_keys
        # stored keys with no resident engine (read on demand); only with a loader
        self.stored_only: set[str] = set(loader.stored_keys(topic, partition) if loader is not None else ())
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
        if engine is not None:
            if self._resident is not None:
                self.engines.move_to_end(key)
            return engine
        if key in self.stored_only:
            engine = self._load(key)
            self.stored_only.discard(key)
        else:
            engine = self._new_engine(key)
        return self._add(key, engine)

    def _load(self, key: str) -> Engine:
        """``key``'s engine from the store (a whole snapshot, or its entries)."""
        assert self._loader is not None
        snapshot, entries = self._loader.load_key(self.topic, self.partition, key, self._backed)
        engine = self._new_engine(key)
        if snapshot is not None:
            engine.restore(snapshot)
            if self._use_entries and is_incremental(engine):
                self._rewrite.add(key)  # stored whole, kept as entries from now on
                self.dirty.add(key)
        elif entries or is_incremental(engine):
            if not is_incremental(engine):
                raise StateError(
                    f"{self.label}: key {key!r} is stored as entries, but this engine keeps none"
                )
            engine.restore_entries(entries)  # type: ignore[attr-defined]
        return engine

    def evict_idle(self) -> int:
        """Drop the least recently used engines unchanged since the last checkpoint (the store holds
        exactly their state) until at most ``resident_keys`` remain; returns how many were dropped."""
        if self._resident is None:
            return 0
        excess = len(self.engines) - self._resident
        dropped = 0
        if excess <= 0:
            return 0
        for key in list(self.engines):
            if key in self.dirty:
                continue
            del self.engines[key]
            self.stored_only.add(key)
            dropped += 1
            if dropped == excess:
                break
        return dropped

    @property
    def key_count(self) -> int:
        """Keys with state: resident engines and the stored keys not loaded."""
        return len(self.engines) + len(self.stored_only)

    def read_engine(self, key: str) -> Engine:
        """``key``'s engine from the store, for reading only: not kept, nothing marked to checkpoint."""
        engine = self._load(key)
        self.dirty.discard(key)
        self._rewrite.discard(key)
        return engine

    def results(self) -> dict[str, Any]:
        """Every key's result; keys not resident are read from the store into throwaway engines."""
        out = {key: engine.result() for key, engine in self.engines.items()}
        for key in sorted(self.stored_only):
            out[key] = self.read_engine(key).result()
        return out

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
