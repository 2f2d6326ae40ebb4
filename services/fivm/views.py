"""The view store: one materialized view as key tuple -> payload, with secondary indexes.

docs/fivm/algorithm.md §2.5 and §4. A key holds the view's key variables in the view's key order.
Zero payloads are never stored: a key whose payload becomes zero leaves the view and every index, and a
later change re-creates it (§2.12). Indexes serve sibling joins that bind only some of a view's key
variables; which ones a view needs is fixed when the trigger plans are compiled.

Iteration order is part of the state: sums of floats depend on it. Keys iterate in the order they were
created; each key carries its creation number (``seq``), stored with the payload, so that a view rebuilt
from entries that arrive in any order iterates exactly as the original did (§4.2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ivmstream.services.fivm import kernels

Key = tuple[Any, ...]


class View:
    def __init__(
        self, name: str, keys: tuple[str, ...], add: Callable[[Any, Any], Any], is_zero: Callable[[Any], bool]
    ) -> None:
        self.name = name
        self.keys = keys
        self.data: dict[Key, Any] = {}
        self.seq: dict[Key, int] = {}
        self.next_seq = 0
        # index positions (into the key) -> bound values -> keys (an insertion-ordered set)
        self.indexes: dict[tuple[int, ...], dict[Key, dict[Key, None]]] = {}
        self.changed: dict[Key, None] = {}  # keys put or deleted since the last checkpoint
        self._add = add
        self._is_zero = is_zero

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key: Key) -> Any:
        """The payload of ``key``, or None when it is absent (zero)."""
        return self.data.get(key)

    def items(self) -> Iterable[tuple[Key, Any]]:
        return self.data.items()

    def lookup(self, positions: tuple[int, ...], values: Key) -> Iterable[Key]:
        """The keys whose components at ``positions`` equal ``values`` (the index must exist)."""
        return self.indexes[positions].get(values, ())

    def add_index(self, positions: tuple[int, ...]) -> None:
        if positions in self.indexes:
            return
        index: dict[Key, dict[Key, None]] = {}
        for key in self.data:
            index.setdefault(tuple([key[i] for i in positions]), {})[key] = None
        self.indexes[positions] = index

    def drop_index(self, positions: tuple[int, ...]) -> None:
        self.indexes.pop(positions, None)

    def add(self, key: Key, delta: Any) -> None:
        """payload[key] += delta; zero payloads leave the view and its indexes."""
        old = self.data.get(key)
        self.changed[key] = None
        if old is None:
            if self._is_zero(delta):
                return
            self._insert(key, delta, self.next_seq)
            self.next_seq += 1
            return
        new = self._add(old, delta)
        if self._is_zero(new):
            self._remove(key)
        else:
            self.data[key] = new

    def add_all(self, delta: Iterable[tuple[Key, Any]]) -> None:
        for key, payload in delta:
            self.add(key, payload)

    def add_nonzero(self, delta: list[tuple[Key, Any]]) -> None:
        """``add_all`` for distinct keys with non-zero payloads (a grouped batch of column rows): keys
        new to the view are installed in one compiled pass (``kernels.install_new``), in ``delta``'s
        order, as the loop would install them; keys the view holds are added to after."""
        if self.indexes:
            self.add_all(delta)
            return
        data = self.data
        self.next_seq, held = kernels.install_new(data, self.seq, self.changed, delta, self.next_seq)
        for key, payload in held:
            new = self._add(data[key], payload)
            if self._is_zero(new):
                self._remove(key)
            else:
                data[key] = new

    def add_counts(self, delta: Iterable[tuple[Key, int]]) -> None:
        """``add`` for a view of int payloads, inlined: its per-tuple cost is most of a batch."""
        data = self.data
        changed = self.changed
        if not self.indexes:  # the insert inline
            seq = self.seq
            nxt = self.next_seq
            for key, m in delta:
                changed[key] = None
                old = data.get(key)
                if old is None:
                    if m:
                        data[key] = m
                        seq[key] = nxt
                        nxt += 1
                elif old + m:
                    data[key] = old + m
                else:
                    self._remove(key)
            self.next_seq = nxt
            return
        for key, m in delta:
            changed[key] = None
            old = data.get(key)
            if old is None:
                if m:
                    self._insert(key, m, self.next_seq)
                    self.next_seq += 1
            elif old + m:
                data[key] = old + m
            else:
                self._remove(key)

    def add_count_map(self, delta: Mapping[Key, int]) -> None:
        """``add_counts`` for a whole map of int changes: keys new to the view (most of a growing
        relation's) are installed with C-level dict updates, in the map's order, as the loop would."""
        if self.indexes:
            self.add_counts(delta.items())
            return
        data = self.data
        self.changed.update(dict.fromkeys(delta))
        present = data.keys() & delta.keys()
        for key in present:
            new = data[key] + delta[key]
            if new:
                data[key] = new
            else:
                self._remove(key)
        fresh: Mapping[Key, int]
        if present or 0 in delta.values():
            fresh = {k: m for k, m in delta.items() if m and k not in present}
        else:
            fresh = delta
        nxt = self.next_seq
        data.update(fresh)
        self.seq.update(zip(fresh, range(nxt, nxt + len(fresh)), strict=True))
        self.next_seq = nxt + len(fresh)

    def load(self, rows: Iterable[tuple[Key, int, Any]], next_seq: int) -> None:
        """Install (key, seq, payload) rows into an empty view, in creation order whatever their order."""
        for key, seq, payload in sorted(rows, key=lambda r: r[1]):
            self._insert(key, payload, seq)
        self.next_seq = next_seq
        self.changed.clear()

    def _insert(self, key: Key, payload: Any, seq: int) -> None:
        self.data[key] = payload
        self.seq[key] = seq
        for positions, index in self.indexes.items():
            bucket = tuple([key[i] for i in positions])
            entry = index.get(bucket)
            if entry is None:
                index[bucket] = {key: None}
            else:
                entry[key] = None

    def _remove(self, key: Key) -> None:
        del self.data[key]
        del self.seq[key]
        for positions, index in self.indexes.items():
            bucket = tuple([key[i] for i in positions])
            entry = index[bucket]
            del entry[key]
            if not entry:
                del index[bucket]


def sync_indexes(views: dict[str, View], need: dict[str, set[tuple[int, ...]]]) -> None:
    """Give each view exactly the indexes the current plans probe (``need``: view name -> key positions)."""
    for name, view in views.items():
        wanted = need.get(name, set())
        for pos in list(view.indexes):
            if pos not in wanted:
                view.drop_index(pos)
        for pos in sorted(wanted):
            view.add_index(pos)
