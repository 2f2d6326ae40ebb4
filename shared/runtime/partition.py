"""The state of one assigned input partition: an engine per partition key and the next offset (and,
for a sharded query, the next broadcast offset its state covers).

With ``resident_keys`` and a store that reads one key at a time (``KeyLoader``), at most that many
engines stay in memory after a checkpoint: the least recently used clean ones are dropped (their state
is exactly what the store holds) and restored from the store when their key is next seen. Engines
changed since the last checkpoint stay until it has written them.

Which keys the store holds is asked of the store (``KeyLoader.has_keys``, point lookups batched per
consumer batch), not kept in an index of every stored key: memory stays bounded by the resident engines
and a bounded cache of recent answers, however many keys the partition has seen."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import orjson

from ivmstream.engine import (
    Engine,
    StoredMap,
    columnar_entry,
    is_incremental,
    store_backed_maps,
    takes_decimal_text,
)
from ivmstream.state import PartitionCheckpoint, StateChanges, StateError, StateStore
from ivmstream.state.base import EntryReader, KeyLoader

# Answers of the store about keys not resident (stored or not) kept at most: enough for the distinct keys
# of a large consumer batch, whose lookups are made together before it is applied.
KNOWN_KEYS = 8192


def origin_marks(stored: bytes | None) -> dict[str, tuple[int, int]]:
    """Stored origin marks: ``<topic>:<partition>`` -> (offset, index) of the last origin record applied."""
    if stored is None:
        return {}
    return {where: (int(mark[0]), int(mark[1])) for where, mark in orjson.loads(stored).items()}


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
        known_keys: int = KNOWN_KEYS,
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
        # with a loader: how many stored keys have no resident engine (read on demand), and a bounded
        # LRU cache of whether recently asked non-resident keys are stored
        self._stored_only = loader.count_keys(topic, partition) if loader is not None else 0
        self._known: OrderedDict[str, bool] = OrderedDict()
        self._known_max = max(1, known_keys)
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
        # a re-keyed view: the last origin record applied per origin partition (ivmstream.runtime.rekey)
        self.origins: dict[str, tuple[int, int]] = origin_marks(cp.origins)
        self._origins_written = dict(self.origins)
        self.dirty: set[str] = set(self._rewrite)
        self.unpublished: set[str] = set()  # emit: checkpoint: keys applied since their result was published

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
        if self._loader is not None and self._is_stored(key):
            engine = self._load(key)
            self._stored_only -= 1
        else:
            engine = self._new_engine(key)
        self._known.pop(key, None)
        return self._add(key, engine)

    def has_state(self, key: str) -> bool:
        """Whether ``key`` has an engine: resident, or stored."""
        return key in self.engines or (self._loader is not None and self._is_stored(key))

    def prefetch(self, keys: Iterable[str]) -> None:
        """Ask the store in one call about the keys not resident and not cached (a consumer batch's keys,
        before it is applied): a remote store then costs a round trip per batch, not per new key."""
        if self._loader is None:
            return
        engines, known = self.engines, self._known
        ask = [k for k in keys if k not in engines and k not in known][: self._known_max]
        if ask:
            for key, stored in zip(ask, self._loader.has_keys(self.topic, self.partition, ask), strict=True):
                self._remember(key, stored)

    def _is_stored(self, key: str) -> bool:
        stored = self._known.get(key)
        if stored is None:
            assert self._loader is not None
            [stored] = self._loader.has_keys(self.topic, self.partition, [key])
            self._remember(key, stored)
        return stored

    def _remember(self, key: str, stored: bool) -> None:
        known = self._known
        known[key] = stored
        known.move_to_end(key)
        if len(known) > self._known_max:
            known.popitem(last=False)

    def stored_only_keys(self) -> list[str]:
        """The stored keys with no resident engine, sorted (read from the store: for listings, not per
        record)."""
        if self._loader is None:
            return []
        engines = self.engines
        return [k for k in self._loader.stored_keys(self.topic, self.partition) if k not in engines]

    def all_keys(self) -> list[str]:
        """Every key with state, resident or stored, sorted."""
        return sorted([*self.engines, *self.stored_only_keys()])

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
        if excess <= 0:
            return 0
        idle = []
        for key in self.engines:
            if key not in self.dirty:
                idle.append(key)
                if len(idle) == excess:
                    break
        if not idle:
            return 0
        assert self._loader is not None
        # An engine whose stored state is empty (e.g. every entry deleted) leaves nothing in the store.
        for key, stored in zip(idle, self._loader.has_keys(self.topic, self.partition, idle), strict=True):
            del self.engines[key]
            self._stored_only += stored
            self._remember(key, stored)
        return len(idle)

    @functools.cached_property
    def takes_columns(self) -> bool:
        """Whether this partition's engines take batches as columns (``ColumnarEngine``), asked of a
        throwaway engine once."""
        return columnar_entry(self._factory()) is not None

    @functools.cached_property
    def decimal_text(self) -> bool:
        """Whether this partition's engines take plain decimal strings as text (``ColumnarEngine``)."""
        return takes_decimal_text(self._factory())

    @property
    def key_count(self) -> int:
        """Keys with state: resident engines and the stored keys not loaded."""
        return len(self.engines) + self._stored_only

    def read_engine(self, key: str) -> Engine:
        """``key``'s engine from the store, for reading only: not kept, nothing marked to checkpoint."""
        engine = self._load(key)
        self.dirty.discard(key)
        self._rewrite.discard(key)
        return engine

    def results(self) -> dict[str, Any]:
        """Every key's result; keys not resident are read from the store into throwaway engines."""
        out = {key: engine.result() for key, engine in self.engines.items()}
        for key in self.stored_only_keys():
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
                # an IncrementalEngine checkpointed whole records no change log: it is never asked for
                # changes, so it never starts one (ivmstream.engine.IncrementalEngine.changed_entries)
                changes.snapshots[key] = engine.snapshot()
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
        if self.origins != self._origins_written:
            changes.origins = orjson.dumps(self.origins)
            self._origins_written = dict(self.origins)
        return changes

    @property
    def label(self) -> str:
        return f"{self.topic}:{self.partition}"
