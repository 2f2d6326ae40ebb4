"""Top-m buffers (docs/sketches/algorithm.md §2.6.3): the best m units of an ordered bag, refillable.

MIN/MAX per group and ORDER BY ... LIMIT k need only the first units of their input in order. A buffer
keeps an *exact prefix* of the whole ordered bag (every unit it drops ranks at or after every unit it
keeps) plus the bag's total size, so it knows when it is complete. An insert that ranks after the last
stored unit of an incomplete buffer cannot be placed (unstored units may rank before it) and is only
counted; a delete of an unstored unit is only counted. When deletes drain the buffer below what the
operator needs, the owner refills it from the full input (a recapture of the operator's child).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sortedcontainers import SortedDict  # type: ignore[import-untyped]


class PrefixBuffer:
    """``key -> (value, units)`` for the first ``m`` units of a bag in key order (``m=None``: all of it)."""

    __slots__ = ("changed", "items", "m", "total", "units")

    def __init__(self, m: int | None) -> None:
        self.m = m
        self.items: SortedDict = SortedDict()
        self.units = 0  # stored units
        self.total = 0  # units of the whole bag
        # key -> value of every key whose stored units changed since the owner last took it (checkpoints)
        self.changed: dict[Any, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.units == self.total

    def insert(self, key: Any, value: Any, n: int) -> None:
        if not self.complete and (not self.items or key > self.items.peekitem(-1)[0]):
            self.total += n  # ranks after an unstored unit's possible place: outside the prefix
            return
        self.total += n
        cur = self.items.get(key)
        self.items[key] = (value, (cur[1] if cur else 0) + n)
        self.units += n
        if self.changed is not None:
            self.changed[key] = value
        self._trim()

    def delete(self, key: Any, n: int) -> None:
        """Remove ``n`` units of ``key``; those not stored lie beyond the prefix and are only counted."""
        self.total -= n
        cur = self.items.get(key)
        if cur is None:
            return
        take = min(cur[1], n)
        if self.changed is not None:
            self.changed[key] = cur[0]
        if take == cur[1]:
            del self.items[key]
        else:
            self.items[key] = (cur[0], cur[1] - take)
        self.units -= take

    def add(self, key: Any, value: Any, n: int) -> None:
        if n > 0:
            self.insert(key, value, n)
        elif n < 0:
            self.delete(key, -n)

    def _trim(self) -> None:
        m = self.m
        if m is None:
            return
        items = self.items
        while self.units > m:
            key, (value, c) = items.peekitem(-1)
            if self.changed is not None:
                self.changed[key] = value
            drop = min(c, self.units - m)
            if drop == c:
                del items[key]
            else:
                items[key] = (value, c - drop)
            self.units -= drop

    def underflow(self, need: int) -> bool:
        """Fewer units stored than the owner needs while the bag has them (refill before reading)."""
        return self.units < min(need, self.total)

    def refill(self, entries: Iterable[tuple[Any, Any, int]]) -> None:
        """Reload from the whole bag, ``(key, value, units)`` in any order."""
        merged: dict[Any, tuple[Any, int]] = {}
        total = 0
        for key, value, n in entries:
            cur = merged.get(key)
            merged[key] = (value, (cur[1] if cur else 0) + n)
            total += n
        if self.changed is not None:
            self.changed.update((k, v[0]) for k, v in self.items.items())
        self.items = SortedDict()
        self.units = 0
        self.total = total
        room = self.m
        for key in sorted(k for k, v in merged.items() if v[1]):
            value, n = merged[key]
            if room is not None:
                if room <= 0:
                    break
                n = min(n, room)
                room -= n
            self.items[key] = (value, n)
            self.units += n
        if self.changed is not None:
            self.changed.update((k, v[0]) for k, v in self.items.items())

    def load(self, entries: Iterable[tuple[Any, Any, int]], total: int) -> None:
        """Restore stored units ``(key, value, units)`` and the bag's size from a checkpoint."""
        for key, value, n in entries:
            self.items[key] = (value, n)
            self.units += n
        self.total = total

    def stored(self, key: Any) -> int:
        cur = self.items.get(key)
        return cur[1] if cur else 0

    def first(self) -> Any:
        """The value of the first stored unit (None if nothing is stored)."""
        return self.items.peekitem(0)[1][0] if self.items else None

    def values(self) -> Iterator[tuple[Any, int]]:
        """``(value, units)`` in order."""
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)
