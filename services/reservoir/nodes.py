"""The tuples of one join-tree node, their items (groups) and hash indexes by each neighbour's key: the
node store under the join index (``index.py``), kept in insertion order so that every walk over it is a
function of the input order alone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Tup = tuple[Any, ...]


def positions(of: Sequence[str], within: Sequence[str]) -> tuple[int, ...]:
    return tuple(within.index(a) for a in of)


class NodeStore:
    """The tuples of one node (with their arrival numbers), their items (groups) and hash indexes by
    each neighbour's key.

    Every order here is the one re-adding the current tuples by arrival number would give (a restore
    does exactly that): a group's members in arrival order, and each key's items in the arrival order
    of their first member, which a delete of a group's first member restores (``remove``)."""

    __slots__ = (
        "attrs",
        "by_key",
        "item_attrs",
        "item_pos",
        "items",
        "key_pos",
        "next_seq",
        "tuples",
        "whole",
    )

    def __init__(self, attrs: tuple[str, ...], neighbours: dict[int, tuple[str, ...]], grouped: bool) -> None:
        self.attrs = attrs
        joined = [a for a in attrs if any(a in shared for shared in neighbours.values())]
        self.item_attrs = tuple(joined) if grouped else attrs
        self.item_pos = positions(self.item_attrs, attrs)
        # items are the tuples themselves (ungrouped, or every column joined): each its own one
        # member, so ``tuples`` holds them and ``items`` (item -> its members) stays empty; a group's
        # members are a list
        self.whole = self.item_pos == tuple(range(len(attrs)))
        self.items: dict[Tup, list[Tup]] = {}
        self.tuples: dict[Tup, int] = {}  # tuple -> arrival number (increasing, never reused)
        self.next_seq = 0
        self.key_pos = {n: positions(shared, self.item_attrs) for n, shared in neighbours.items()}
        self.by_key: dict[int, dict[Tup, dict[Tup, None]]] = {n: {} for n in neighbours}

    def item_of(self, t: Tup) -> Tup:
        return t if self.whole else tuple(t[i] for i in self.item_pos)

    def members(self, item: Tup) -> Sequence[Tup]:
        """The tuples of an item present here, in arrival order."""
        return (item,) if self.whole else self.items[item]

    def all_items(self) -> Iterable[Tup]:
        """Every item present, in the order of their first members' arrival."""
        return self.tuples if self.whole else self.items

    def add(self, t: Tup, seq: int | None = None) -> tuple[Tup, bool]:
        """Record ``t`` (with arrival number ``seq``, default the next one); returns its item and
        whether the item is new."""
        if seq is None:
            seq = self.next_seq
        self.tuples[t] = seq
        if seq >= self.next_seq:
            self.next_seq = seq + 1
        if self.whole:
            item = t
        else:
            item = tuple(t[i] for i in self.item_pos)
            members = self.items.get(item)
            if members is not None:
                members.append(t)  # type: ignore[union-attr]
                return item, False
            self.items[item] = [t]
        for n, pos in self.key_pos.items():
            self.by_key[n].setdefault(tuple(item[i] for i in pos), {})[item] = None
        return item, True

    def remove(self, t: Tup) -> tuple[Tup, bool]:
        """Forget ``t`` (present); returns its item and whether the item is gone."""
        del self.tuples[t]
        item = self.item_of(t)
        members = self.members(item)
        if len(members) == 1:  # t alone: the item goes
            for n, pos in self.key_pos.items():
                v = tuple(item[i] for i in pos)
                at = self.by_key[n][v]
                del at[item]
                if not at:
                    del self.by_key[n][v]
            if not self.whole:
                del self.items[item]
            return item, True
        group = self.items[item]  # a group of several (an item of the tuple itself is alone)
        first = group[0] == t
        group.remove(t)
        if first:  # the item now ranks by its next member's arrival
            seq = self.tuples
            for n, pos in self.key_pos.items():
                v = tuple(item[i] for i in pos)
                at = self.by_key[n][v]
                self.by_key[n][v] = dict.fromkeys(sorted(at, key=lambda it: seq[self.items[it][0]]))
        return item, False
