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
from typing import TYPE_CHECKING, Any

import orjson

from ivmstream.sdk import EngineError, Entry, EntryChange, json_bytes

if TYPE_CHECKING:
    from ivmstream.services.triangles.base import Index, TriangleEngine

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def json_int(v: int) -> int | str:
    """An int orjson can write (int64), else its exact decimal string: counts must never become floats."""
    return v if INT64_MIN <= v <= INT64_MAX else str(v)


def changed_entries(engine: TriangleEngine) -> list[EntryChange]:
    """The entries changed since the previous call (all of them until a checkpoint has taken the state)."""
    if engine._all_changed:
        engine._forget_changes()
        return list(engine.all_entries())
    mult, dumps = engine._mult, json_bytes
    moved = engine._rows_moved
    # A row's part changes by a rebalancing (recorded in ``moved``) or by an update that empties a
    # heavy row or, when new rows start heavy, creates one: only those rows of touched tuples count.
    stored = engine._stored_parts
    every_row = engine._rows_born_heavy()
    out: list[EntryChange] = []
    if engine.graph:
        edges: dict[tuple[Any, Any], int | None] = dict(engine._edge_changes)
        engine._edge_changes.clear()
        for _k, x, y in engine._changed:  # apply_tuple's directed tuples: look them up
            edges[_edge(x, y)] = None
        directed = engine._directed
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
        for t in engine._changed:
            m = mult(*t)
            out.append(("t", dumps(t), _mult_bytes(m) if m else None))
            row = (t[0], t[1])
            if every_row or row in stored:
                moved.add(row)
    engine._changed.clear()
    if engine._has_parts():
        heavy = engine._is_heavy
        for row in moved:
            now = heavy(*row)
            if now != (row in stored):
                out.append(("h", dumps(row), b"1" if now else None))
                (stored.add if now else stored.discard)(row)
    moved.clear()
    out.extend(engine._scalar_entries())
    return out


def every_entry(engine: TriangleEngine) -> Iterator[Entry]:
    """Every entry of the engine's state."""
    dumps = json_bytes
    edges = engine._mirror_edges() if engine.graph and not engine._directed else None
    if edges is not None:  # a simple graph's edges, each (a, b) = _edge(a, b) once, multiplicity 1
        for a, b in edges:
            yield "t", _edge_key(a, b), b"1"
    elif engine.graph and not engine._directed:  # symmetric: each edge from its stored direction
        for x, row in engine._rows(0):
            for y, m in row.items():
                a, b = _edge(x, y)
                if a == x:
                    yield "t", _edge_key(a, b), _mult_bytes(m)
    elif engine.graph:
        mult = engine._mult
        for x, row in engine._rows(0):
            for y in row:
                a, b = _edge(x, y)
                if a == x or not mult(0, y, x):  # each edge once, from its stored direction
                    value = _edge_bytes(mult(0, a, b), mult(0, b, a))
                    assert value is not None
                    yield "t", dumps((0, a, b)), value
    else:
        for k in range(engine.nrel):
            for x, row in engine._rows(k):
                for y, m in row.items():
                    yield "t", dumps((k, x, y)), _mult_bytes(m)
    if engine._has_parts():
        for heavy_row in engine._heavy_rows():
            yield "h", dumps(heavy_row), b"1"
    yield from engine._scalar_entries()


def restore_entries(engine: TriangleEngine, entries: Iterable[Entry]) -> None:
    """Rebuild the engine from every entry of a checkpoint (views and indexes derived on the way)."""
    fwd: list[Index] = [{} for _ in range(engine.nrel)]
    heavy: set[tuple[int, Any]] = set()
    scalars: dict[bytes, bytes] = {}
    loads = orjson.loads
    graph = engine.graph
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
    if loads(scalars.get(b"config", b"null")) != engine._config():
        raise EngineError(
            f"state entries were written with {scalars.get(b'config')!r}, not {engine._config()}"
        )
    engine._load_tuples(fwd, heavy)
    engine.q = int(loads(scalars[b"q"]))
    counters = loads(scalars[b"counters"])
    for name in engine._COUNTERS:
        setattr(engine, name, counters[name])
    engine.work = engine.work_total
    engine._changed.clear()
    engine._edge_changes.clear()
    engine._rows_moved.clear()
    engine._all_changed = False
    engine._after_restore()
    engine._stored_parts = engine._heavy_rows()
    engine._directed = directed


def scalar_entries(engine: TriangleEngine) -> list[Entry]:
    """The "s" map (engines add theirs in ``_scalar_entries``): Q and the counters change with every
    update, so every checkpoint writes them (a few bytes)."""
    return [
        ("s", b"q", orjson.dumps(str(engine.q))),
        ("s", b"counters", orjson.dumps({name: getattr(engine, name) for name in engine._COUNTERS})),
        ("s", b"config", orjson.dumps(engine._config())),
    ]


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
