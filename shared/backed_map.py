"""A map of an engine's state that need not be resident: read through the state store, bounded cache.

An engine keeps one of its maps in a ``StoreBackedMap`` and reports the map's ``changes()`` in its
``changed_entries()``. Until the runtime attaches a ``StoredMap`` the map is an ordinary in-memory map
that also logs its changes (replay, tests, bootstrap, the snapshot layout). Once attached:

- reads that miss the cache go to the store, which holds exactly the last checkpoint;
- puts and deletes are *dirty*: they stay in memory, whatever the bound, until ``changes()`` hands
  them out for a checkpoint, so nothing unflushed is ever evicted and reads always see them;
- everything else (values read from the store, flushed changes, and known absences) is *clean* and
  kept in least-recently-used order, evicted once more than ``capacity`` entries are resident.

So the engine's view is always the last checkpoint plus its own uncommitted writes, and after a crash
the cache starts empty and reads go to the store, which again holds exactly the last checkpoint.

Pure: the store is reached only through the two callables of ``StoredMap``.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import is_, itemgetter
from typing import Any, Generic, TypeVar

from ivmstream.engine import Entry, EntryChange, StoredMap

V = TypeVar("V")


def py_entry_changes(name: str, dirty: dict[bytes, Any], encode: Callable[[Any], bytes]) -> list[EntryChange]:
    """``(name, key, encode(value))`` per item of ``dirty`` in its order, ``(name, key, None)`` for a
    None value (a delete): the Python form of the compiled ``entry_changes`` (shared/_backed_map.c),
    which also makes the tuples untracked by the cyclic collector and encodes a run of one value once."""
    if any(map(is_, dirty.values(), repeat(None))):
        return [(name, k, None if v is None else encode(v)) for k, v in dirty.items()]
    return list(zip(repeat(name), dirty, map(encode, dirty.values())))  # puts only: a column at a time


try:
    from ivmstream._backed_map import entry_changes as compiled_entry_changes
except ImportError:  # no C compiler where it was installed: the Python form
    compiled_entry_changes = None  # type: ignore[assignment]

# Set IVMSTREAM_PURE_PYTHON=1 to list changes in Python even where the extension is built.
entry_changes: Callable[[str, dict[bytes, Any], Callable[[Any], bytes]], list[EntryChange]] = (
    compiled_entry_changes
    if compiled_entry_changes is not None and os.environ.get("IVMSTREAM_PURE_PYTHON", "") != "1"
    else py_entry_changes
)


class StoreBackedMap(Generic[V]):
    """Entry key (bytes) -> value, backed by one stored map; at most ``capacity`` clean entries resident.

    Values are never None (None means absent). ``encode``/``decode`` convert values to the stored bytes.
    """

    __slots__ = (
        "_clean",
        "_decode",
        "_dirty",
        "_encode",
        "_source",
        "capacity",
        "evictions",
        "hits",
        "misses",
        "name",
    )

    def __init__(
        self,
        name: str,
        encode: Callable[[V], bytes],
        decode: Callable[[bytes], V],
        capacity: int | None = None,
    ) -> None:
        if capacity is not None and capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.name = name
        self.capacity = capacity  # None: no bound (also the case until a store is attached)
        self._encode = encode
        self._decode = decode
        # Clean entries; once attached an OrderedDict in LRU order (oldest first), where None caches
        # "absent from the store". Unattached, a plain dict (no order to keep, less memory per entry).
        self._clean: dict[bytes, V | None] = {}
        self._dirty: dict[bytes, V | None] = {}  # changed since the last changes(); None: deleted
        self._source: StoredMap | None = None
        self.hits = 0  # reads answered from memory
        self.misses = 0  # reads that went to the store
        self.evictions = 0

    # --- the store behind it --------------------------------------------------------------------------

    def attach(self, source: StoredMap) -> None:
        """Read through ``source`` from now on; clean entries beyond ``capacity`` may be evicted."""
        self._source = source
        self._clean = OrderedDict(self._clean)
        self._evict()

    @property
    def attached(self) -> bool:
        return self._source is not None

    # --- reads and writes -----------------------------------------------------------------------------

    def get(self, key: bytes) -> V | None:
        """The value (None: absent): the last checkpoint's, or this engine's own write since."""
        if key in self._dirty:
            self.hits += 1
            return self._dirty[key]
        clean = self._clean
        if key in clean:
            self.hits += 1
            if self._source is not None:
                clean.move_to_end(key)  # type: ignore[attr-defined]  # an OrderedDict once attached
            return clean[key]
        if self._source is None:  # everything is resident: not here means absent
            self.hits += 1
            return None
        self.misses += 1
        raw = self._source.get(key)
        value = None if raw is None else self._decode(raw)
        clean[key] = value
        self._evict()
        return value

    def get_many(self, keys: Sequence[bytes]) -> list[V | None]:
        """``get`` of each key (an engine's batch of distinct members). While nothing is attached every
        entry is resident, and the lookups run as one pass."""
        if self._source is not None:
            return [self.get(k) for k in keys]
        self.hits += len(keys)
        return list(map(self._dirty.get, keys, map(self._clean.get, keys)))  # a dirty None: deleted

    def put_many(self, items: Iterable[tuple[bytes, V]]) -> None:
        """``put`` of each (key, value), in order."""
        if self._source is not None:
            for k, v in items:
                self.put(k, v)
            return
        items = list(items)
        self._dirty.update(items)
        clean = self._clean
        if clean:  # a key is dirty or clean, never both
            deque(map(clean.pop, map(itemgetter(0), items), repeat(None)), maxlen=0)

    def resident_dicts(self) -> tuple[dict[bytes, V | None], dict[bytes, V | None]] | None:
        """The dirty and clean dicts while nothing is attached (every entry resident), for a batch update
        that writes them in place by ``put``'s and ``delete``'s rules: a written key leaves clean and is
        dirty, a dirty None is a delete. None once a store is attached (reads then go through it)."""
        return (self._dirty, self._clean) if self._source is None else None

    def put(self, key: bytes, value: V) -> None:
        self._clean.pop(key, None)
        self._dirty[key] = value
        self._evict()

    def delete(self, key: bytes) -> None:
        self._clean.pop(key, None)
        self._dirty[key] = None
        self._evict()

    # --- checkpoints ----------------------------------------------------------------------------------

    def changes(self) -> list[EntryChange]:
        """Puts and deletes since the previous call, as entry changes; they become clean (evictable)."""
        name, encode, dirty = self.name, self._encode, self._dirty
        deletes = any(map(is_, dirty.values(), repeat(None)))
        out = entry_changes(name, dirty, encode)
        clean, cap = self._clean, self.capacity
        if self._source is None and not deletes:
            if len(clean) < len(dirty):  # the smaller merged into the larger (a key is in one of them)
                dirty.update(clean)
                self._clean, self._dirty = dirty, clean
                dirty = clean
            else:
                clean.update(dirty)
        elif self._source is None:  # everything stays; absent entries need no memory
            for k, v in dirty.items():
                if v is not None:
                    clean[k] = v
        else:  # those that would be evicted at once are not cached at all
            keep: Iterable[tuple[bytes, V | None]] = dirty.items()
            if cap is not None and len(dirty) > cap:
                keep = list(keep)[-cap:]
                self.evictions += len(dirty) - cap
            clean.update(keep)
        dirty.clear()
        self._evict()
        return out

    def items(self) -> Iterator[tuple[bytes, V]]:
        """Every present entry, decoded, in no particular order (reads the whole stored map if attached)."""
        dirty, decode = self._dirty, self._decode
        if self._source is None:
            for k, v in self._clean.items():
                if v is not None:
                    yield k, v
        else:
            for k, raw in self._source.scan():
                if k not in dirty:
                    yield k, decode(raw)
        for k, v in dirty.items():
            if v is not None:
                yield k, v

    def entries(self) -> Iterator[Entry]:
        """Every present entry as stored bytes (``all_entries()``)."""
        name, encode = self.name, self._encode
        if self._source is not None:  # stored bytes as they are, without a decode/encode round trip
            dirty = self._dirty
            for k, raw in self._source.scan():
                if k not in dirty:
                    yield name, k, raw
            for k, v in dirty.items():
                if v is not None:
                    yield name, k, encode(v)
            return
        for k, v in self.items():
            yield name, k, encode(v)

    def load(self, entries: Iterable[tuple[bytes, bytes]]) -> None:
        """Entries as the store holds them (``restore_entries``): clean, evictable once attached."""
        clean, decode = self._clean, self._decode
        for k, raw in entries:
            clean[k] = decode(raw)
        self._evict()

    def replace(self, items: Iterable[tuple[bytes, V]]) -> None:
        """Make the map hold exactly ``items`` (``restore()`` of a snapshot): all of them dirty, and every
        other stored entry deleted, so the next ``changes()`` writes the whole new state."""
        self._clean.clear()
        self._dirty.clear()
        if self._source is not None:
            for k, _raw in self._source.scan():
                self._dirty[k] = None
        for k, v in items:
            self._dirty[k] = v

    # --- sizes ----------------------------------------------------------------------------------------

    @property
    def resident(self) -> int:
        """Entries held in memory (clean, including cached absences, and dirty)."""
        return len(self._clean) + len(self._dirty)

    @property
    def dirty(self) -> int:
        return len(self._dirty)

    def stats(self) -> dict[str, float]:
        return {
            "resident": float(self.resident),
            "dirty": float(len(self._dirty)),
            "hits": float(self.hits),
            "misses": float(self.misses),
            "evictions": float(self.evictions),
        }

    def _evict(self) -> None:
        cap = self.capacity
        if cap is None or self._source is None:
            return
        clean = self._clean
        over = len(clean) + len(self._dirty) - cap
        if over <= 0:
            return
        over = min(over, len(clean))
        pop = clean.popitem  # an OrderedDict once attached: last=False pops the least recently used
        for _ in range(over):
            pop(last=False)  # type: ignore[call-arg]
        self.evictions += over
