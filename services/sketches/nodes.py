"""The operator interface of a sketch-annotated plan, the types its operators share and the base-table
scan: annotated tuples ``(row, P)`` with ``P`` an int bitmask of global fragment ids
(docs/sketches/algorithm.md §2.2), Z-set deltas ``{(row, P): signed multiplicity}`` and the database
view a capture reads."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ivmstream.services.sketches.partition import RangeSpec

Row = tuple[Any, ...]
StateEntry = tuple[str, list[Any], Any]  # (map, key parts after the node id, JSON value or None: deleted)
Loaded = Mapping[str, list[tuple[list[Any], Any]]]  # map -> [(key parts, value)]
ZSet = dict[tuple[Row, int], int]
Annotated = list[tuple[Row, int, int]]  # (row, P, multiplicity), multiplicity > 0
Expr = Callable[[Row], Any]


class DbView:
    """The rows a capture reads, possibly only some fragments: per table its rows grouped by local
    fragment, ``(fragment, {row: multiplicity})`` (an unpartitioned table's rows all in fragment 0)."""

    def __init__(self, fragments: Callable[[str], Iterable[tuple[int, Mapping[Row, int]]]]) -> None:
        self.fragments = fragments

    def rows(self, table: str) -> Iterator[tuple[Row, int]]:
        for _, rows in self.fragments(table):
            yield from rows.items()


def bits(mask: int) -> Iterator[int]:
    """The set bits of a sketch, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _add(out: ZSet, key: tuple[Row, int], n: int) -> None:
    v = out.get(key, 0) + n
    if v:
        out[key] = v
    else:
        out.pop(key, None)


class Node:
    children: tuple[Node, ...] = ()
    # The database the operator's child is recaptured from when a top-m buffer underflows (§2.6.3); the
    # engine sets it to its table store, at the batch's new version by the time flush() reads it.
    source: Callable[[], DbView] | None = None
    width = 0  # columns of the output row (join inputs)

    def capture(self, db: DbView) -> Annotated:
        raise NotImplementedError

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        raise NotImplementedError

    def flush(self) -> ZSet:
        raise NotImplementedError

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            yield from c.walk()

    def stats(self) -> dict[str, float]:
        return {}

    def set_top_m(self, m: int | None) -> None:
        """Bound MIN/MAX and top-k state to m units (§2.6.3); only those operators keep such state."""

    def lookup(self, positions: tuple[int, ...], key: Row) -> Iterable[tuple[Row, int, int]]:
        """The current output rows whose columns ``positions`` equal ``key``, read from the table store
        (probe joins, §2.4.5): ``(row, P, multiplicity)``."""
        raise NotImplementedError(f"{type(self).__name__} cannot be probed (select-project-join only)")

    def entries(self, changed: bool) -> Iterator[StateEntry]:
        """The operator's state as checkpoint entries (§6): all of them, or (``changed``) those that
        changed since the last such call, which then forgets them."""
        return iter(())

    def load(self, entries: Loaded) -> None:
        """Rebuild the state from its entries (called after the table store is loaded)."""

    def forget_changes(self) -> None:
        """Drop what ``entries(True)`` would hand out, without building the entries (no checkpoint
        reads them)."""
        for _ in self.entries(True):
            pass


class Scan(Node):
    """Table access: annotate each tuple with the bit of its fragment (§2.1; unpartitioned: P = 0)."""

    def __init__(self, table: str, spec: RangeSpec | None, width: int = 0) -> None:
        self.table = table
        self.spec = spec
        self.width = width
        # The table store's secondary indexes (``services/sketches/probe.py``), set by the engine.
        self.indexes: Any = None

    def annotate(self, row: Row) -> int:
        spec = self.spec
        if spec is None:
            return 0
        return 1 << (spec.offset + spec.fragment(row[spec.position]))

    def annotated_fragments(self, db: DbView) -> Iterator[tuple[int, Mapping[Row, int]]]:
        """The table's rows a fragment at a time, each group with the sketch all its rows have (the
        view groups rows by the fragment ``annotate`` gives them)."""
        spec = self.spec
        offset = None if spec is None else spec.offset
        for f, rows in db.fragments(self.table):
            yield (0 if offset is None else 1 << (offset + f)), rows

    def capture(self, db: DbView) -> Annotated:
        out: Annotated = []
        for p, rows in self.annotated_fragments(db):
            out += [(row, p, n) for row, n in rows.items()]
        return out

    def push(self, table: str, delta: Mapping[Row, int]) -> ZSet:
        if table != self.table:
            return {}
        spec = self.spec
        if spec is None:
            return {(row, 0): n for row, n in delta.items()}
        pos, bounds, offset = spec.position, spec.boundaries, spec.offset  # annotate(), inline
        return {
            (row, 1 << (offset + (0 if (v := row[pos]) is None else bisect_right(bounds, v)))): n
            for row, n in delta.items()
        }

    def flush(self) -> ZSet:
        return {}

    def lookup(self, positions: tuple[int, ...], key: Row) -> Iterable[tuple[Row, int, int]]:
        if None in key:
            return  # a NULL key matches nothing (SQL)
        ann = self.annotate
        for row, n in self.indexes.lookup(self.table, positions, key):
            yield row, ann(row), n
