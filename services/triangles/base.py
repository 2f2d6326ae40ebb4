"""What every triangle engine shares: event intake for both modes, Q, counters, result and snapshots.

Relations are Z-relations stored as nested dicts ``index[x][y] = multiplicity`` (never 0, never an empty
row), so ``len(index[x])`` is the degree and ``index.get(x)`` is a constant-time row probe
(docs/triangles/algorithm.md §2.4).
Relation k ∈ {0: R(a,b), 1: S(b,c), 2: T(c,a)}; an update to relation k at (x, y) joins with the row y of
relation k+1 and the column x of relation k+2. Graph mode keeps one relation E and aliases all three
roles to it (k = k+1 = k+2 = 0), which turns the same delta code into the self-join rules of
docs/triangles/algorithm.md §2.11.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import orjson

from ivmstream.sdk import EngineError, Rejection, UpdateEvent
from ivmstream.services.triangles.entries import INT64_MAX, INT64_MIN, Index, StoreEntries, _edge, json_int
from ivmstream.services.triangles.kernels import bump

MODES = ("graph", "relations")
REL_NAMES = ("R", "S", "T")
REL_COLUMNS = (("a", "b"), ("b", "c"), ("c", "a"))
REL_INDEX = {name: k for k, name in enumerate(REL_NAMES)}
EDGE_RELATION = "edges"
EDGE_COLUMNS = ("src", "dst")
VIEW_NAMES = ("RS", "ST", "TR")  # view k joins relation k with relation k+1

SNAPSHOT_FORMAT = "ivmstream.triangles/1"


def transpose(index: Index) -> Index:
    """The index on the second variable: out[y][x] = index[x][y]."""
    out: Index = {}
    for x, row in index.items():
        for y, m in row.items():
            col = out.get(y)
            if col is None:
                out[y] = {x: m}
            else:
                col[x] = m
    return out


def support(index: Index) -> int:
    return sum(len(row) for row in index.values())


def count_triangles(fwd: Sequence[Index], bwd: Sequence[Index]) -> tuple[int, int]:
    """Q = Σ_{(a,b)∈R} R(a,b)·Σ_c S(b,c)·T(c,a), iterating the smaller of S(b,·) and T(·,a)
    (docs/triangles/algorithm.md §4.5).

    O(N^{3/2}); the recompute baseline, BUILD and the invariant checker use it. ``fwd``/``bwd`` are the
    three relations by first and by second variable (the same index thrice in graph mode).
    Returns (Q, loop iterations)."""
    r_f, s_f, t_b = fwd[0], fwd[1], bwd[2]
    q = 0
    work = 0
    for a, row in r_f.items():
        col = t_b.get(a)
        if col is None:
            continue
        for b, m in row.items():
            srow = s_f.get(b)
            if srow is None:
                continue
            acc = 0
            if len(srow) <= len(col):
                work += len(srow)
                for c, ms in srow.items():
                    mt = col.get(c)
                    if mt is not None:
                        acc += ms * mt
            else:
                work += len(col)
                for c, mt in col.items():
                    ms = srow.get(c)
                    if ms is not None:
                        acc += ms * mt
            q += m * acc
    return q, work


def dump_index(index: Index) -> list[list[Any]]:
    """[[x, [y1, m1, y2, m2, ...]], ...] in dict order (restore rebuilds the same order)."""
    out = []
    for x, row in index.items():
        flat: list[Any] = []
        for y, m in row.items():
            flat.append(y)
            flat.append(m if INT64_MIN <= m <= INT64_MAX else str(m))
        out.append([x, flat])
    return out


def load_index(rows: Iterable[list[Any]]) -> Index:
    index: Index = {}
    for x, flat in rows:
        it = iter(flat)
        index[x] = {y: int(m) for y, m in zip(it, it, strict=True)}
    return index


class TriangleEngine(StoreEntries):
    """Base of all strategies: turns events into tuple updates and keeps Q, |D| and the work counters.

    Subclasses implement ``_update(k, x, y, m)`` (one single-tuple update, including any rebalancing),
    ``_mult``, ``_build``, ``_relation_sizes`` and the snapshot hooks. One applied graph event is two directed
    tuple updates, (u,v) and (v,u); Q is only read between events, never between the two halves.
    """

    strategy: ClassVar[str]
    _COUNTERS: ClassVar[tuple[str, ...]] = (
        "events",
        "tuple_updates",
        "work_total",
        "work_last",
    )

    def __init__(self, mode: str = "graph") -> None:
        if mode not in MODES:
            raise EngineError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.graph = mode == "graph"
        self.nrel = 1 if self.graph else 3
        # Roles of an update to relation k: next relation (joined on y) and previous one (joined on x).
        self._nxt = (0, 0, 0) if self.graph else (1, 2, 0)
        self._prv = (0, 0, 0) if self.graph else (2, 0, 1)
        self.q = 0
        self.size = 0  # |D|: distinct tuples with nonzero multiplicity over all relations
        self.work = 0  # running total of work units (delta/view loop iterations and view probes)
        self.events = 0
        self.tuple_updates = 0
        self.work_total = 0
        self.work_last = 0
        self._changed: set[tuple[int, Any, Any]] = set()  # tuples touched since the last checkpoint
        self._edge_changes: dict[tuple[Any, Any], int] = {}  # graph events: stored edge -> its new m
        # True until a checkpoint takes the state (and again after BUILD or a snapshot restore): no change
        # is logged (replay, benchmarks: nothing reads one), and the next changed_entries() answers with
        # every entry.
        self._all_changed = True
        self._rows_moved: set[tuple[int, Any]] = set()  # rows whose part changed (strategies with parts)
        # The heavy rows as of the previous changed_entries() or restore: what the store's "h" map holds.
        self._stored_parts: set[tuple[int, Any]] = set()
        self._directed = False  # graph mode: whether some edge's two directions differ (apply_tuple only)
        # Gauge names of the relation sizes, built once: the result is read after every batch.
        self._size_keys = tuple(f"size_{n}" for n in ((EDGE_RELATION,) if self.graph else REL_NAMES))

    # --- intake ------------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        """Apply events in order; refused events change nothing (graph set semantics, bad ids)."""
        rejected: list[Rejection] = []
        if self.graph:
            self._apply_graph(events, rejected)
        else:
            self._apply_relations(events, rejected)
        self._finish_batch()
        self.work_total = self.work
        if self._all_changed:
            self._forget_changes()
        return rejected

    def _apply_relations(self, events: Sequence[UpdateEvent], rejected: list[Rejection]) -> None:
        update = self._update
        changed = self._changed.add
        for i, ev in enumerate(events):
            k = REL_INDEX.get(ev.relation)
            if k is None:
                rejected.append(Rejection(i, "unknown-relation", f"unknown relation {ev.relation!r}"))
                continue
            m = ev.delta
            if m.__class__ is not int or not m:
                code = "zero-delta" if m.__class__ is int else "bad-delta"
                rejected.append(Rejection(i, code, f"delta must be a nonzero integer, got {m!r}"))
                continue
            xc, yc = REL_COLUMNS[k]
            row = ev.row
            try:
                x = row[xc]
                y = row[yc]
            except KeyError as exc:
                rejected.append(Rejection(i, "missing-column", f"{ev.relation}.{exc.args[0]} is missing"))
                continue
            if not (
                ((x.__class__ is int and INT64_MIN <= x <= INT64_MAX) or x.__class__ is str)
                and ((y.__class__ is int and INT64_MIN <= y <= INT64_MAX) or y.__class__ is str)
            ):
                code, detail = _bad_id(x) or _bad_id(y) or ("wrong-type", "bad id")
                rejected.append(Rejection(i, code, f"{ev.relation}: {detail}"))
                continue
            w0 = self.work
            update(k, x, y, m)
            changed((k, x, y))
            self.work_last = self.work - w0
            self.events += 1

    def _apply_graph(
        self,
        events: Sequence[UpdateEvent],
        rejected: list[Rejection],
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        """Graph events ``events[start:stop]`` in order (``Rejection`` indexes count from events[0])."""
        update = self._update
        pair = self._update_pair
        changed = self._edge_changes
        mult = self._mult
        for i, ev in enumerate(events[start:stop] if start or stop is not None else events, start):
            if ev.relation != EDGE_RELATION:
                rejected.append(
                    Rejection(i, "unknown-relation", f"graph mode accepts only {EDGE_RELATION!r}")
                )
                continue
            row = ev.row
            try:
                u = row["src"]
                v = row["dst"]
            except KeyError as exc:
                rejected.append(Rejection(i, "missing-column", f"edges.{exc.args[0]} is missing"))
                continue
            if not (
                ((u.__class__ is int and INT64_MIN <= u <= INT64_MAX) or u.__class__ is str)
                and ((v.__class__ is int and INT64_MIN <= v <= INT64_MAX) or v.__class__ is str)
            ):
                code, detail = _bad_id(u) or _bad_id(v) or ("wrong-type", "bad id")
                rejected.append(Rejection(i, code, f"edges: {detail}"))
                continue
            m = ev.delta
            if m.__class__ is not int or (m != 1 and m != -1):
                rejected.append(
                    Rejection(i, "bad-multiplicity", f"an edge is inserted (+1) or deleted (-1), got {m!r}")
                )
                continue
            if u == v:
                rejected.append(Rejection(i, "self-loop", f"self-loop {u!r}-{v!r} is not an edge"))
                continue
            present = mult(0, u, v) != 0
            if m == 1 and present:
                rejected.append(Rejection(i, "duplicate-edge", f"edge {u!r}-{v!r} is already present"))
                continue
            if m == -1 and not present:
                rejected.append(Rejection(i, "absent-edge", f"edge {u!r}-{v!r} is not present"))
                continue
            w0 = self.work
            if pair is None:
                update(0, u, v, m)
                update(0, v, u, m)
            else:
                pair(u, v, m)
            # One entry per undirected edge, and its multiplicity is known here: none to look up later.
            changed[_edge(u, v)] = 1 if m == 1 else 0
            self.work_last = self.work - w0
            self.events += 1

    def apply_tuple(self, relation: str, x: Any, y: Any, m: int) -> None:
        """One single-tuple update with Z semantics, bypassing event validation.

        ``relation`` is R/S/T, or ``E`` in graph mode: one *directed* tuple of E, no symmetry and no set
        semantics (self-loops and multiplicities allowed). For tests, benchmarks and bootstrap code."""
        if self.graph:
            if relation != "E":
                raise EngineError(f"graph mode has one relation 'E', got {relation!r}")
            k = 0
        else:
            k = REL_INDEX.get(relation)
            if k is None:
                raise EngineError(f"relations are R, S, T; got {relation!r}")
        if type(m) is not int or not m:
            raise EngineError(f"multiplicity change must be a nonzero int, got {m!r}")
        w0 = self.work
        self._update(k, x, y, m)
        self._changed.add((k, x, y))
        self._directed = self._directed or self.graph
        self.work_last = self.work - w0
        self._finish_batch()
        self.work_total = self.work
        if self._all_changed:
            self._forget_changes()

    # --- BUILD -------------------------------------------------------------------------------------

    def load(self, data: Mapping[str, Mapping[tuple[Any, Any], int]] | Iterable[tuple[Any, Any]]) -> None:
        """Preprocessing from a database D₀ (docs/triangles/algorithm.md §2.5) into an empty engine.

        Relations mode: ``{"R": {(a, b): m, ...}, "S": ..., "T": ...}`` (Z-relations, m ≠ 0).
        Graph mode: an iterable of undirected edges (u, v), each once, no self-loops."""
        if self.size or self.tuple_updates:
            raise EngineError("load() needs an empty engine")
        fwd: list[Index] = [{} for _ in range(self.nrel)]
        if self.graph:
            for u, v in data:  # type: ignore[misc]
                if u == v:
                    raise EngineError(f"self-loop {u!r}-{v!r} in graph input")
                if _bad_id(u) or _bad_id(v):
                    raise EngineError(f"bad vertex id in edge {u!r}-{v!r}")
                if v in fwd[0].get(u, ()):
                    raise EngineError(f"duplicate edge {u!r}-{v!r} in graph input")
                bump(fwd[0], u, v, 1)
                bump(fwd[0], v, u, 1)
        else:
            if not isinstance(data, Mapping) or set(data) - set(REL_NAMES):
                raise EngineError(
                    "relations-mode load() takes a mapping {'R': {...}, 'S': {...}, 'T': {...}}"
                )
            for name, tuples in data.items():
                k = REL_INDEX[name]
                for (x, y), m in tuples.items():
                    if type(m) is not int or _bad_id(x) or _bad_id(y):
                        raise EngineError(f"bad tuple {name}({x!r}, {y!r}) with multiplicity {m!r}")
                    if m:
                        bump(fwd[k], x, y, m)
        self._build(fwd)
        self._all_changed = True

    # --- result, stats, snapshot -------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": json_int(self.q)}
        if self.graph:
            out["triangles"] = json_int(self.q // 6)
        out["stats"] = self.stats_exact()
        return out

    def stats_exact(self) -> dict[str, int]:
        """Diagnostics as exact ints: work counters, sizes and strategy-specific gauges."""
        out = {
            "events": self.events,
            "tuple_updates": self.tuple_updates,
            "work_last": self.work_last,
            "work_total": self.work_total,
            "size": self.size,
        }
        for key, n in zip(self._size_keys, self._relation_sizes(), strict=True):
            out[key] = n
        out.update(self._stats_extra())
        return out

    def stats(self) -> dict[str, float]:
        """Numeric gauges for Prometheus (flat name -> float); ``count`` is lossy above 2^53."""
        out = {name: float(v) for name, v in self.stats_exact().items()}
        out["count"] = float(self.q)
        return out

    def snapshot(self) -> bytes:
        body = {
            "format": SNAPSHOT_FORMAT,
            "config": self._config(),
            "q": str(self.q),
            "counters": {name: getattr(self, name) for name in self._COUNTERS},
            "relations": self._dump_relations(),
        }
        return orjson.dumps(body)

    def restore(self, data: bytes) -> None:
        try:
            snap = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise EngineError(f"triangles snapshot is not valid JSON: {exc}") from None
        if not isinstance(snap, dict) or snap.get("format") != SNAPSHOT_FORMAT:
            raise EngineError(f"not a {SNAPSHOT_FORMAT} snapshot")
        config = self._config()
        if snap["config"] != config:
            raise EngineError(f"snapshot was taken with {snap['config']}, this engine is {config}")
        self._load_relations(snap["relations"])
        self.q = int(snap["q"])
        for name in self._COUNTERS:
            setattr(self, name, snap["counters"][name])
        self.work = self.work_total
        self._after_restore()
        self._stored_parts = self._heavy_rows()
        self._directed = self.graph and not self._symmetric()
        self._all_changed = True  # whole snapshots: no change log until a checkpoint takes entries
        self._forget_changes()

    # --- subclass hooks ------------------------------------------------------------------------------

    def _finish_batch(self) -> None:
        """Called after each ``apply``/``apply_tuple``; the recompute baseline counts here."""

    def _update(self, k: int, x: Any, y: Any, m: int) -> None:
        raise NotImplementedError

    # Graph events: both directions of an edge in one call, for a strategy that handles the pair at
    # once (``auto`` prices the event once); None applies them as two ``_update`` calls.
    _update_pair: Callable[[Any, Any, int], None] | None = None

    def _build(self, fwd: list[Index]) -> None:
        raise NotImplementedError

    def _relation_sizes(self) -> list[int]:
        raise NotImplementedError

    def _stats_extra(self) -> dict[str, int]:
        return {}

    def _dump_relations(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_relations(self, data: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _rel_name(self, k: int) -> str:
        return EDGE_RELATION if self.graph else REL_NAMES[k]

    def _view_name(self, k: int) -> str:
        return "V" if self.graph else VIEW_NAMES[k]


def _bad_id(v: Any) -> tuple[str, str] | None:
    """Ids are int64 or strings (query.py declares which); anything else cannot be stored or bootstrapped."""
    cls = v.__class__
    if cls is int:
        if INT64_MIN <= v <= INT64_MAX:
            return None
        return "id-out-of-range", f"id {v} is outside int64"
    if cls is str:
        return None
    return "wrong-type", f"id {v!r} must be an int or a string, got {cls.__name__}"


Hook = Callable[[dict[str, Any]], None]
