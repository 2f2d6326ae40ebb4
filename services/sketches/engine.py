"""The sketches engine: one provenance sketch maintained over update events, and data skipping with it.

State (docs/sketches/algorithm.md §6): a fragment-clustered table store (every table the query reads,
rows grouped by their fragment) and the operator state of the plan (join indexes, group state with
fragment counts, top-k order, the merge counts μ). Strategies (§4):

* ``imp``: each batch is pushed through the incremental operators (§2.4); the sketch changes by the
  merge's zero crossings (§2.4.11).
* ``full``: updates only change the table store; a stale sketch is recaptured when read (§2.3).
* ``nosketch``: no sketch; every fragment is scanned.

The result (§7.2) is the sketch per partitioned table, the query answered over the sketched fragments
only (data skipping, §2.7) and how many rows that scanned. Checkpoints hold the table store (one entry
per distinct row, keyed by table and fragment) and every operator's state as its own map, written as
changed entries only (§6), so a restore reads the state back instead of recomputing it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from operator import itemgetter
from typing import Any

import orjson

from ivmstream.sdk import Entry, EntryChange, Rejection, UpdateEvent, json_bytes
from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches import state as S
from ivmstream.services.sketches.catalog import Table
from ivmstream.services.sketches.compiler import Compiled, compile_options
from ivmstream.services.sketches.partition import RangeSpec
from ivmstream.services.sketches.probe import BaseIndexes
from ivmstream.services.sketches.values import exact, row_key, to_json

STORE = "t"  # map: orjson [table, fragment, row] -> multiplicity
BOOTSTRAPPED = S.dumps(["bootstrapped"])  # in map x: the operator state is built (imp)
# Counters reported by stats() but not part of the result: they restart with the process.
COUNTERS = ("bloom_probes", "bloom_filtered", "probe_lookups", "topm_refills")


def _encode_default(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)
    raise TypeError(f"cannot store {type(v).__name__}")


class SketchEngine:
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = dict(options)
        self.strategy: str = options["strategy"]
        self.compiled: Compiled = compile_options(options)
        self.tables: dict[str, Table] = self.compiled.tables
        self.specs: dict[str, RangeSpec] = {s.table: s for s in self.compiled.specs}
        # Per table the event columns in row order and where its partition column is (apply's reads).
        self._readers = {t: (table.event_columns, self._partition_of(t)) for t, table in self.tables.items()}
        self.store: dict[str, dict[int, dict[P.Row, int]]] = {t: {} for t in self.tables}
        self.rows: dict[str, int] = {t: 0 for t in self.tables}
        self.merge = P.Merge()
        self.stale = True  # full: the cached sketch predates the last update
        self.cached = 0
        self.last_delta = (0, 0)  # the sketch delta of the last batch (added, removed fragment bits)
        self._dirty: set[tuple[str, int, P.Row]] = set()  # (table, fragment, row) changed since a checkpoint
        self._decimal = {
            t: [typ in ("decimal", "exact") for typ in table.types] for t, table in self.tables.items()
        }
        self._bootstrapped = False
        self.indexes = BaseIndexes(self.store)  # for probe joins (§2.4.5)
        self.nodes = list(self.compiled.root.walk())  # a node's position names its state entries
        self._marker_dirty = False
        # Whether changes are logged: once a checkpoint has taken the state (replay and benchmarks never
        # checkpoint, so nothing is kept for one); the first changed_entries() is every entry.
        self._logging = False
        for node in self.nodes:
            node.source = self._whole_store  # top-m refills recapture from the store (§2.6.3)
            if isinstance(node, P.Scan):
                node.indexes = self.indexes

    def _whole_store(self) -> P.DbView:
        return self.view(None)

    # --- updates ----------------------------------------------------------------------------------------

    def _fragment(self, table: str, row: P.Row) -> int:
        spec = self.specs.get(table)
        return 0 if spec is None else spec.fragment(row[spec.position])

    def multiplicity(self, table: str, row: P.Row) -> int:
        return self.store[table].get(self._fragment(table, row), {}).get(row, 0)

    def _partition_of(self, table: str) -> tuple[int, tuple[Any, ...]] | None:
        """The partition column's position and the sorted boundaries (None: unpartitioned), for
        computing fragments inline (``RangeSpec.fragment``: NULL in 0, else ``bisect_right``)."""
        spec = self.specs.get(table)
        return None if spec is None else (spec.position, spec.boundaries)

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        """Validate the events in order against the store plus the batch so far, then maintain once."""
        rejected: list[Rejection] = []
        batch: dict[str, dict[P.Row, int]] = {}
        readers, store, nonnegative = self._readers, self.store, self.compiled.nonnegative
        for i, ev in enumerate(events):
            relation = ev.relation
            reader = readers.get(relation)
            if reader is None:
                rejected.append(Rejection(i, "unknown-relation", f"the query does not read {relation!r}"))
                continue
            columns, partition = reader
            row = tuple(map(ev.row.get, columns))
            if Decimal in map(type, row):
                row = tuple(map(exact, row))
            if partition is None:
                frag = 0
            else:
                v = row[partition[0]]
                frag = 0 if v is None else bisect_right(partition[1], v)
            pending = batch.get(relation)
            if pending is None:
                pending = batch[relation] = {}
            stored = store[relation].get(frag)
            was = pending.get(row, 0)
            have = (stored.get(row, 0) if stored else 0) + was
            delta = ev.delta
            if have + delta < 0:
                rejected.append(
                    Rejection(i, "absent-tuple", f"delete of {-delta} copies of {row!r} which has {have}")
                )
                continue
            if delta > 0 and relation in nonnegative:
                bad = [what for f, what in nonnegative[relation] if _negative(f(row))]
                if bad:
                    rejected.append(
                        Rejection(
                            i, "negative-input", f"{', '.join(bad)} < 0 breaks monotone_aggregates (S4)"
                        )
                    )
                    continue
            n = was + delta
            if n:
                pending[row] = n
            else:
                pending.pop(row, None)
        self.maintain({t: d for t, d in batch.items() if d})
        return rejected

    def maintain(self, batch: Mapping[str, Mapping[P.Row, int]]) -> None:
        """One net-consistent batch of base-table deltas (§2.5): maintain the sketch, update the store."""
        if self.strategy == "imp" and not self._bootstrapped:
            self._bootstrap()
        out: P.ZSet = {}
        for table in sorted(batch):
            delta = batch[table]
            if not delta:
                continue
            if self.strategy == "imp":
                out = _fold(out, self.compiled.root.push(table, delta))
            self._store(table, delta)
        if self.strategy == "imp":
            out = _fold(out, self.compiled.root.flush())
            self.last_delta = self.merge.apply(out)
        elif batch:
            self.stale = True
        if not self._logging:
            self._forget_changes()

    def _forget_changes(self) -> None:
        """Drop the change log (store rows, operator state, merge counts): nothing will read it."""
        self._dirty.clear()
        if self._bootstrapped:
            for node in self.nodes:
                node.forget_changes()
            self.merge.entries(True)
        self._marker_dirty = False

    def pending_changes(self) -> int:
        """Store rows changed since the last checkpoint, plus the operators' and the merge's records."""
        held = len(self._dirty) + len(self.merge.dirty)
        for node in self.nodes:
            held += len(getattr(node, "dirty", ()))
            held += sum(len(keys) for keys in getattr(node, "changed_values", {}).values())
            held += len(getattr(getattr(node, "state", None), "changed", None) or ())
        return held

    def _store(self, table: str, delta: Mapping[P.Row, int]) -> None:
        frags = self.store[table]
        partition = self._partition_of(table)
        indexed = bool(self.indexes.by_table.get(table))  # probe joins' indexes (built on first lookup)
        mark = self._dirty.add
        total = 0
        for row, n in delta.items():
            if partition is None:
                f = 0
            else:
                v = row[partition[0]]
                f = 0 if v is None else bisect_right(partition[1], v)
            rows = frags.get(f)
            if rows is None:
                rows = frags[f] = {}
            c = rows.get(row, 0) + n
            if c < 0:
                raise AssertionError(f"{table} row {row!r} below zero")
            if c:
                rows[row] = c
            else:
                del rows[row]
                if not rows:
                    del frags[f]
            if indexed:
                self.indexes.update(table, row, c)
            total += n
            mark((table, f, row))
        self.rows[table] += total

    def _bootstrap(self) -> None:
        """Operator state from the stored database: all of it one batch of inserts into an empty store
        (§2.5), table by table as the driver pushes (probe joins read the tables pushed so far)."""
        self._bootstrapped = True
        self._marker_dirty = True
        out: P.ZSet = {}
        whole = {
            t: {row: n for rows in frags.values() for row, n in rows.items()}
            for t, frags in self.store.items()
        }
        dirty = set(self._dirty)
        for table in self.store:
            self.store[table] = {}
            self.rows[table] = 0
        self.indexes.clear()
        for table in sorted(whole):
            if whole[table]:
                out = _fold(out, self.compiled.root.push(table, whole[table]))
                self._store(table, whole[table])
        self._dirty = dirty
        out = _fold(out, self.compiled.root.flush())
        self.merge.apply(out)
        self.last_delta = (0, 0)

    # --- reading -------------------------------------------------------------------------------------

    def all_fragments(self) -> int:
        out = 0
        for s in self.specs.values():
            out |= ((1 << s.fragments) - 1) << s.offset
        return out

    def view(self, sketch: int | None) -> P.DbView:
        """The stored database, restricted to the sketch's fragments of partitioned tables (None: all)."""

        def fragments(table: str) -> Iterator[tuple[int, Mapping[P.Row, int]]]:
            spec = self.specs.get(table)
            for f, frag_rows in self.store[table].items():
                if sketch is not None and spec is not None and not sketch >> (spec.offset + f) & 1:
                    continue
                yield f, frag_rows

        return P.DbView(fragments)

    def sketch(self) -> int:
        """The current sketch as global fragment bits (``nosketch``: every fragment)."""
        if self.strategy == "imp":
            if not self._bootstrapped:
                self._bootstrap()
            return self.merge.sketch
        if self.strategy == "full":
            if self.stale:
                self.cached = P.capture_sketch(self.compiled.root, self.view(None))
                self.stale = False
            return self.cached
        return self.all_fragments()

    def skipping_sketch(self) -> int:
        """The fragments the use path scans: the sketch if proven safe, else everything (§5)."""
        return self.sketch() if self.compiled.safety is not None else self.all_fragments()

    def rows_scanned(self, sketch: int) -> int:
        total = 0
        for table, frags in self.store.items():
            spec = self.specs.get(table)
            for f, rows in frags.items():
                if spec is None or sketch >> (spec.offset + f) & 1:
                    total += sum(rows.values())
        return total

    def answer(self, sketch: int | None, compiled: Compiled | None = None) -> list[list[Any]]:
        """The query (or another instance, §2.7.1) over the sketched fragments (None: all data), in SQL
        order or sorted."""
        compiled = compiled or self.compiled
        out: list[tuple[Any, ...]] = []
        for row, _, n in compiled.root.capture(self.view(sketch)):
            out.extend([row] * n)
        if not compiled.ordered:
            out.sort(key=row_key)
        return [[to_json(v) for v in row] for row in out]

    def result(self) -> dict[str, Any]:
        sketch = self.sketch()
        scan = self.skipping_sketch()
        out: dict[str, Any] = {
            "sketch": {
                s.table: [f for f in range(s.fragments) if sketch >> (s.offset + f) & 1]
                for s in self.specs.values()
            },
            "fragments": {s.table: s.fragments for s in self.specs.values()},
            "answer": self.answer(scan),
            "rows_scanned": self.rows_scanned(scan),
            "rows_total": sum(self.rows.values()),
            "stats": {
                "strategy": self.strategy,
                "safety": self.compiled.safety,
                "sketch_fragments": bin(sketch).count("1"),
                **{k: int(v) for k, v in self._state_sizes().items()},
            },
        }
        if self.compiled.instances:  # other instances of the template, skipping with this sketch
            out["instances"] = [
                {"query": sql, "answer": self.answer(scan, inst)} for sql, inst in self.compiled.instances
            ]
        return out

    def _state_sizes(self) -> dict[str, float]:
        out: dict[str, float] = {"merge_fragments": float(len(self.merge.counts))}
        if self.strategy == "imp":
            for node in self.nodes:
                for k, v in node.stats().items():
                    if k not in COUNTERS:
                        out[k] = out.get(k, 0.0) + v
        return out

    def stats(self) -> dict[str, float]:
        out = self._state_sizes()
        for node in self.nodes:
            for k, v in node.stats().items():
                if k in COUNTERS:
                    out[k] = out.get(k, 0.0) + v
        out["rows"] = float(sum(self.rows.values()))
        return out

    # --- state ---------------------------------------------------------------------------------------

    def _key(self, table: str, fragment: int, row: P.Row) -> bytes:
        """A store entry's key: ``[table, fragment, row]`` in JSON (orjson writes the tuple as an array)."""
        return json_bytes([table, fragment, row], default=_encode_default)

    def _decode(self, key: bytes) -> tuple[str, P.Row]:
        table, _, values = orjson.loads(key)
        flags = self._decimal[table]
        return table, tuple(
            exact(Decimal(v)) if flag and isinstance(v, str) else v
            for flag, v in zip(flags, values, strict=True)
        )

    def _node_entries(self, changed: bool) -> Iterator[EntryChange]:
        if not self._bootstrapped:
            return  # no operator state (full, nosketch, or imp before its first batch)
        for nid, node in enumerate(self.nodes):
            for name, parts, value in node.entries(changed):
                yield name, S.dumps([nid, *parts]), None if value is None else S.dumps(value)
        for r, n in self.merge.entries(changed):
            yield S.MERGE, S.dumps([r]), None if n is None else str(n).encode()
        if self._bootstrapped and (self._marker_dirty or not changed):
            yield S.SCALARS, BOOTSTRAPPED, b"1"
        if changed:
            self._marker_dirty = False

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; changes are logged from now on (a checkpoint is taking the state)."""
        self._logging = True
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        for table in sorted(self.store):
            for f, rows in self.store[table].items():
                for row, n in rows.items():
                    yield STORE, self._key(table, f, row), str(n).encode()
        for name, key, value in self._node_entries(False):
            assert value is not None
            yield name, key, value

    def changed_entries(self) -> list[EntryChange]:
        """Entries put or deleted since the previous call; at the first call every entry."""
        if not self._logging:
            self._forget_changes()
            return list(self.all_entries())
        out: list[EntryChange] = []
        store, key = self.store, self._key
        for table, f, row in self._dirty:
            rows = store[table].get(f)
            n = rows.get(row, 0) if rows else 0
            out.append((STORE, key(table, f, row), str(n).encode() if n else None))
        out.sort(key=_entry_key)  # by the key's bytes: one order whatever order the rows changed in
        self._dirty.clear()
        out.extend(sorted(self._node_entries(True), key=lambda e: (e[0], e[1])))
        return out

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        batch: dict[str, dict[P.Row, int]] = {}
        by_node: dict[int, dict[str, list[tuple[list[Any], Any]]]] = {}
        counts: list[tuple[int, int]] = []
        bootstrapped = False
        for name, key, value in entries:
            if name == STORE:
                table, row = self._decode(key)
                batch.setdefault(table, {})[row] = int(value)
            elif name == S.MERGE:
                counts.append((S.loads(key)[0], int(value)))
            elif name == S.SCALARS and key == BOOTSTRAPPED:
                bootstrapped = True
            elif name in S.NODE_MAPS:
                nid, *parts = S.loads(key)
                by_node.setdefault(nid, {}).setdefault(name, []).append((parts, S.loads(value)))
            else:
                raise ValueError(f"unknown state map {name!r}")
        self._load(batch)
        if bootstrapped:
            for nid, node in enumerate(self.nodes):
                node.load(by_node.get(nid, {}))
            self.merge.load(counts)
            self._bootstrapped = True
        elif by_node or counts:
            raise ValueError("operator state without its bootstrap marker")
        self._logging = True

    def _load(self, batch: Mapping[str, Mapping[P.Row, int]]) -> None:
        fresh = SketchEngine(self.options)
        self.__dict__.update(fresh.__dict__)
        for table, delta in batch.items():
            self._store(table, delta)
        self._dirty.clear()

    def snapshot(self) -> bytes:
        """Every entry, sorted: the same bytes for the same state whatever order built it."""
        entries = sorted((name, k, v) for name, k, v in self._entries())
        return orjson.dumps([[name, k.decode(), v.decode()] for name, k, v in entries])

    def restore(self, data: bytes) -> None:
        self.restore_entries((name, k.encode(), v.encode()) for name, k, v in orjson.loads(data))
        self._logging = False  # whole snapshots: no change log until a checkpoint takes entries


_entry_key = itemgetter(1)


def _negative(v: Any) -> bool:
    return v is not None and v < 0


def _fold(out: P.ZSet, delta: P.ZSet) -> P.ZSet:
    """``out + delta``, in ``out``; an empty ``out`` gives ``delta`` itself (an operator's output delta is
    a fresh dict nothing else holds, so it is taken over instead of copied key by key)."""
    if not out:
        return delta
    for k, n in delta.items():
        v = out.get(k, 0) + n
        if v:
            out[k] = v
        else:
            out.pop(k, None)
    return out
