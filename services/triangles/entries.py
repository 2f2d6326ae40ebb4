"""The triangle engines' incremental state as store entries (ivmstream.engine.IncrementalEngine,
docs/triangles/algorithm.md §5.2).

Map "t": one entry per stored tuple, key [k, x, y], value its multiplicity; in graph mode one entry
per undirected edge, key [0, a, b] with (a, b) = _edge(x, y). Map "h": the rows [k, x] a strategy
with heavy/light parts (IVM^ε) keeps in the heavy part, so moving a row between parts rewrites one
entry, not its tuples. Map "s": Q, the counters and the configuration. Views and reverse indexes
are functions of these and are rebuilt on restore, as from a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import orjson

from ivmstream.sdk import EngineError, Entry, EntryChange, json_bytes

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Index = dict[Any, dict[Any, int]]  # index[x][y] = multiplicity (never 0, never an empty row)


def json_int(v: int) -> int | str:
    """An int orjson can write (int64), else its exact decimal string: counts must never become floats."""
    return v if INT64_MIN <= v <= INT64_MAX else str(v)


class StoreEntries:
    """The base of every triangle engine: its state as store entries and the hooks they read (an
    engine's relations, heavy rows and configuration; ``TriangleEngine`` and the strategies define them)."""

    strategy: ClassVar[str]
    _COUNTERS: ClassVar[tuple[str, ...]]
    mode: str
    graph: bool
    nrel: int
    q: int
    work: int
    work_total: int
    _all_changed: bool
    _changed: set[tuple[int, Any, Any]]
    _edge_changes: dict[tuple[Any, Any], int]
    _rows_moved: set[tuple[int, Any]]
    _stored_parts: set[tuple[int, Any]]
    _directed: bool

    def pending_changes(self) -> int:
        return len(self._changed) + len(self._edge_changes) + len(self._rows_moved)

    def _forget_changes(self) -> None:
        """Drop the change log: nothing will read it (no checkpoint has taken the state)."""
        self._changed.clear()
        self._edge_changes.clear()
        self._rows_moved.clear()

    def changed_entries(self) -> list[EntryChange]:
        """The entries changed since the previous call (all of them until a checkpoint takes the state)."""
        if self._all_changed:
            self._forget_changes()
            return list(self.all_entries())
        mult, dumps = self._mult, json_bytes
        moved = self._rows_moved
        # A row's part changes by a rebalancing (recorded in ``moved``) or by an update that empties a
        # heavy row or, when new rows start heavy, creates one: only those rows of touched tuples count.
        stored = self._stored_parts
        every_row = self._rows_born_heavy()
        out: list[EntryChange] = []
        if self.graph:
            edges: dict[tuple[Any, Any], int | None] = dict(self._edge_changes)
            self._edge_changes.clear()
            for _k, x, y in self._changed:  # apply_tuple's directed tuples: look them up
                edges[_edge(x, y)] = None
            directed = self._directed
            for (a, b), m in edges.items():
                if directed:
                    value = _edge_bytes(mult(0, a, b), mult(0, b, a))
                else:
                    if m is None:
                        m = mult(0, a, b)
                    value = _mult_bytes(m) if m else None
                out.append(("t", _edge_key(a, b), value))
                if stored or every_row:
                    for row in ((0, a), (0, b)):
                        if every_row or row in stored:
                            moved.add(row)
        else:
            for t in self._changed:
                m = mult(*t)
                out.append(("t", dumps(t), _mult_bytes(m) if m else None))
                row = (t[0], t[1])
                if every_row or row in stored:
                    moved.add(row)
        self._changed.clear()
        if self._has_parts():
            heavy = self._is_heavy
            for row in moved:
                now = heavy(*row)
                if now != (row in stored):
                    out.append(("h", dumps(row), b"1" if now else None))
                    (stored.add if now else stored.discard)(row)
        moved.clear()
        out.extend(self._scalar_entries())
        return out

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; changes are logged from now on (a checkpoint is taking the state)."""
        self._all_changed = False
        self._stored_parts = self._heavy_rows()
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        """Every entry of the state."""
        dumps = json_bytes
        edges = self._mirror_edges() if self.graph and not self._directed else None
        if edges is not None:  # a simple graph's edges, each (a, b) = _edge(a, b) once, multiplicity 1
            for a, b in edges:
                yield "t", _edge_key(a, b), b"1"
        elif self.graph and not self._directed:  # symmetric: each edge from its stored direction
            for x, row in self._rows(0):
                for y, m in row.items():
                    a, b = _edge(x, y)
                    if a == x:
                        yield "t", _edge_key(a, b), _mult_bytes(m)
        elif self.graph:
            mult = self._mult
            for x, row in self._rows(0):
                for y in row:
                    a, b = _edge(x, y)
                    if a == x or not mult(0, y, x):  # each edge once, from its stored direction
                        value = _edge_bytes(mult(0, a, b), mult(0, b, a))
                        assert value is not None
                        yield "t", dumps((0, a, b)), value
        else:
            for k in range(self.nrel):
                for x, row in self._rows(k):
                    for y, m in row.items():
                        yield "t", dumps((k, x, y)), _mult_bytes(m)
        if self._has_parts():
            for heavy_row in self._heavy_rows():
                yield "h", dumps(heavy_row), b"1"
        yield from self._scalar_entries()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        """Rebuild the self from every entry of a checkpoint (views and indexes derived on the way)."""
        fwd: list[Index] = [{} for _ in range(self.nrel)]
        heavy: set[tuple[int, Any]] = set()
        scalars: dict[bytes, bytes] = {}
        loads = orjson.loads
        graph = self.graph
        directed = False
        for map_name, key, value in entries:
            if map_name == "t":
                k, x, y = loads(key)
                stored = loads(value)
                if stored.__class__ is list:  # graph mode, a directed pair with unequal multiplicities
                    m, back = int(stored[0]), int(stored[1])
                    directed = True
                else:
                    m = back = int(stored)
                if m:
                    row = fwd[k].get(x)
                    if row is None:
                        row = fwd[k][x] = {}
                    row[y] = m
                if graph and back:  # the other direction of the undirected edge
                    row = fwd[0].get(y)
                    if row is None:
                        row = fwd[0][y] = {}
                    row[x] = back
            elif map_name == "h":
                k, x = loads(key)
                heavy.add((k, x))
            elif map_name == "s":
                scalars[key] = value
            else:
                raise EngineError(f"unknown triangles state map {map_name!r}")
        if loads(scalars.get(b"config", b"null")) != self._config():
            raise EngineError(
                f"state entries were written with {scalars.get(b'config')!r}, not {self._config()}"
            )
        self._load_tuples(fwd, heavy)
        self.q = int(loads(scalars[b"q"]))
        counters = loads(scalars[b"counters"])
        for name in self._COUNTERS:
            setattr(self, name, counters[name])
        self.work = self.work_total
        self._changed.clear()
        self._edge_changes.clear()
        self._rows_moved.clear()
        self._all_changed = False
        self._after_restore()
        self._stored_parts = self._heavy_rows()
        self._directed = directed

    def _scalar_entries(self) -> list[Entry]:
        """The "s" map (engines add theirs in ``_scalar_entries``): Q and the counters change with every
        update, so every checkpoint writes them (a few bytes)."""
        return [
            ("s", b"q", orjson.dumps(str(self.q))),
            ("s", b"counters", orjson.dumps({name: getattr(self, name) for name in self._COUNTERS})),
            ("s", b"config", orjson.dumps(self._config())),
        ]

    # --- hooks the entries read ---------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        return {"mode": self.mode, "strategy": self.strategy}

    def _mult(self, k: int, x: Any, y: Any) -> int:
        raise NotImplementedError

    def _rows(self, k: int) -> Iterable[tuple[Any, dict[Any, int]]]:
        """Every row x -> {y: m} of relation k, for a full scan of the state."""
        raise NotImplementedError

    def _load_tuples(self, fwd: list[Index], heavy: set[tuple[int, Any]]) -> None:
        """Install restored relations (``fwd[k][x][y] = m``; ``heavy``: rows stored in a heavy part)."""
        raise NotImplementedError

    def _symmetric(self) -> bool:
        """Graph mode: whether every stored tuple's reverse has the same multiplicity (O(N))."""
        mult = self._mult
        return all(mult(0, y, x) == m for x, row in self._rows(0) for y, m in row.items())

    def _mirror_edges(self) -> list[tuple[Any, Any]] | None:
        """Graph mode: every edge once from a compiled mirror that holds them, else None."""
        return None

    def _rows_born_heavy(self) -> bool:
        """Whether an update can create a row in a heavy part (IVM^ε with ε = 0)."""
        return False

    def _has_parts(self) -> bool:
        """Whether rows live in a heavy or a light part (then ``_is_heavy``/``_heavy_rows`` apply)."""
        return False

    def _is_heavy(self, k: int, x: Any) -> bool:
        return False

    def _heavy_rows(self) -> set[tuple[int, Any]]:
        return set()

    def _after_restore(self) -> None:
        """Rebuild state derived from the restored relations and counters (either restore path)."""


def _edge(x: Any, y: Any) -> tuple[Any, Any]:
    """The stored direction of an undirected edge: the smaller id first (ints before strings)."""
    if x.__class__ is y.__class__:
        return (x, y) if x < y else (y, x)
    return (x, y) if x.__class__ is int else (y, x)


def _edge_bytes(forward: int, backward: int) -> bytes | None:
    """An undirected edge's value: its multiplicity, or both directions' when they differ (only tuples
    applied one direction at a time with ``apply_tuple`` do); None when neither direction is stored."""
    if forward == backward:
        return _mult_bytes(forward) if forward else None
    return json_bytes((json_int(forward), json_int(backward)))


def _mult_bytes(m: int) -> bytes:
    if m == 1:  # every edge of a graph built from events
        return b"1"
    return json_bytes(m if INT64_MIN <= m <= INT64_MAX else str(m))


def _edge_key(a: Any, b: Any) -> bytes:
    """``json_bytes((0, a, b))``, the key of an edge's entry; formatted directly for two int ids."""
    if a.__class__ is int and b.__class__ is int:
        return b"[0,%d,%d]" % (a, b)
    return json_bytes((0, a, b))
