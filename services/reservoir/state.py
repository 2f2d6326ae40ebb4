"""The reservoir engine's state (docs/reservoir/algorithm.md §9): whole snapshots and incremental
entries, and restoring either, kept apart from the event handling in ``engine.py``."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

import orjson

from ivmstream.sdk import Entry, EntryChange, json_bytes
from ivmstream.services.reservoir.bags import BagLayer
from ivmstream.services.reservoir.index import JoinIndex, Tup
from ivmstream.services.reservoir.query import Query
from ivmstream.services.reservoir.sampler import ReplacementReservoir, Reservoir

REL, NODE, DIR, META = "rel", "node", "dir", "meta"  # the maps of the incremental state (§9)
_META_KEY = b"state"
# An entry changed since the last checkpoint, by its native parts (map, owner, tuple): encoded only when a
# checkpoint takes it, so a pending change costs a dict slot and the tuple it shares with the state.
LogKey = tuple[str, str | int, Tup]


class EngineState:
    """Snapshots, checkpoint entries and restores of ``ReservoirEngine`` (its base class)."""

    query: Query
    index: JoinIndex
    bags: BagLayer
    rels: dict[str, dict[Tup, int]]
    node_of: dict[str, int]
    shared_nodes: dict[int, str]
    rng: random.Random
    sampler: Reservoir | ReplacementReservoir
    drawn: list[Tup]
    counters: dict[str, int]
    known_size: int | None
    all_results: int
    rel_seq: int
    _log: dict[LogKey, int | None]
    _logging: bool
    _replayable: bool
    _dir_stored: bool
    _meta_changed: bool

    def _hold_keys(self) -> None:
        raise NotImplementedError

    def _fresh_structures(self) -> None:
        raise NotImplementedError

    def _meta(self) -> dict[str, Any]:
        index = self.index
        version, mt, gauss = self.rng.getstate()
        return {
            "sampler": self.sampler.state(),
            "drawn": [list(r) for r in self.drawn],
            "rng": [version, list(mt), gauss],
            "counters": self.counters,
            "known_size": None if self.known_size is None else str(self.known_size),
            "all_results": str(self.all_results),
            "work": [index.places, index.propagations, index.retrieves],
            "rel_seq": self.rel_seq,
            "node_seq": [node.next_seq for node in index.nodes],
            "replayable": self._replayable,
        }

    def snapshot(self) -> bytes:
        index = self.index
        state = {
            "rels": {a: [[list(t), seq] for t, seq in rel.items()] for a, rel in self.rels.items()},
            "nodes": [[[list(t), seq] for t, seq in node.tuples.items()] for node in index.nodes],
            "ds": index.dump_directed(),
            **self._meta(),
        }
        return orjson.dumps(state)

    def restore(self, data: bytes) -> None:
        self._load(orjson.loads(data), logging=False)

    def _load(self, st: dict[str, Any], logging: bool) -> None:
        """Replace the state with ``st``; ``logging``: record changes from now on (the store holds ``st``).
        Without ``ds`` (entries of a replayable engine) the index is rebuilt by re-inserting the alias
        tuples in arrival order, which makes the same container operations as the stream did."""
        self._logging = logging
        self._replayable = st.get("replayable", False)
        self._dir_stored = "ds" in st
        self.rels = {a: {tuple(t): seq for t, seq in rows} for a, rows in st["rels"].items()}
        self._hold_keys()
        self._fresh_structures()
        index = self.index
        if "ds" in st:
            self._load_index(st["nodes"], st["ds"])
        else:
            self._replay()
        for node, next_seq in zip(index.nodes, st["node_seq"], strict=True):
            node.next_seq = next_seq
        version, mt, gauss = st["rng"]
        self.rng.setstate((version, tuple(mt), gauss))
        self.sampler.load(st["sampler"])
        self.drawn = [tuple(r) for r in st["drawn"]]
        self.counters = dict(st["counters"])
        self.known_size = None if st["known_size"] is None else int(st["known_size"])
        self.all_results = int(st["all_results"])
        index.places, index.propagations, index.retrieves = st["work"]
        self.rel_seq = st["rel_seq"]
        self._log.clear()
        index.dirty.clear()
        self._meta_changed = True

    def _load_index(self, nodes: list[Any], ds: list[Any]) -> None:
        """The bags, node stores and structures as stored."""
        for alias, rel in self.rels.items():
            for t in rel:
                self.bags.record(alias, t)
        for n, node, rows in zip(self.query.nodes, self.index.nodes, nodes, strict=True):
            own = self.rels[n.members[0]] if len(n.members) == 1 else {}  # share its numbers (_shared_seq)
            for t_, seq in rows:
                t = tuple(t_)
                shared = own.get(t)
                node.add(t, shared if shared == seq else seq)
        self.index.load_directed(ds)

    def _replay(self) -> None:
        """Insert every alias tuple (already in ``rels``) into the bags and the index in arrival order,
        as ``_insert_alias`` did, without sampling."""
        arrivals = sorted(
            ((seq, alias, t) for alias, rel in self.rels.items() for t, seq in rel.items()), key=itemgetter(0)
        )
        for seq, alias, t in arrivals:
            e = self.node_of[alias]
            if alias in self.bags.plans:
                for b in self.bags.insert(alias, t):
                    self.index.insert(e, b, None)
            else:
                self.index.insert(e, t, seq)

    def pending_changes(self) -> int:
        """Alias and node tuples logged, index keys marked and the small state's entry, if changed: what
        the next ``changed_entries`` hands out (nothing while no checkpoint has taken the state)."""
        if not self._logging:
            return 0
        return len(self._log) + self._pending_structure_entries() + int(self._meta_changed)

    def _pending_structure_entries(self) -> int:
        if self._replayable:
            return 0
        if self._dir_stored:
            return len(self.index.dirty)
        return sum(len(keys) for keys in self.index.held_keys())  # written all at once (a delete came)

    def changed_entries(self) -> list[EntryChange]:
        """Alias tuples and node tuples put or deleted, the index keys touched, and the small state; at
        the first call every entry (nothing was recorded before it)."""
        if not self._logging:
            self._meta_changed = False
            return list(self.all_entries())
        index = self.index
        out: list[EntryChange] = [
            (m, _key(owner, t), None if seq is None else b"%d" % seq)
            for (m, owner, t), seq in self._log.items()
        ]
        self._log.clear()
        if not self._replayable and not self._dir_stored:
            out += self._structure_entries()
            self._dir_stored = index.tracking = True
        ds, held, dump = index.ds, index.held_keys(), index.dump_key
        out += [
            (DIR, _key(di, v), json_bytes(dump(ds[di], v)) if v in held[di] else None)
            for di, v in index.dirty
        ]
        index.dirty.clear()
        if self._meta_changed:
            out.append((META, _META_KEY, json_bytes(self._meta())))
            self._meta_changed = False
        return out

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; changes are recorded from now on (a checkpoint is taking the state)."""
        self._logging = True
        self._dir_stored = self.index.tracking = not self._replayable
        self.index.dirty.clear()
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        for alias, rel in self.rels.items():
            for t, seq in rel.items():
                yield REL, _key(alias, t), str(seq).encode()
        index = self.index
        for e, node in enumerate(index.nodes):
            if e in self.shared_nodes:
                continue
            for t, seq in node.tuples.items():
                yield NODE, _key(e, t), str(seq).encode()
        if not self._replayable:
            yield from self._structure_entries()
        yield META, _META_KEY, json_bytes(self._meta())

    def _structure_entries(self) -> Iterator[Entry]:
        index = self.index
        for d in index.ds:
            for v in index.keys(d):
                yield DIR, _key(d.idx, v), json_bytes(index.dump_key(d, v))

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        rels: dict[str, list[tuple[int, list[Any]]]] = {a: [] for a in self.query.relations}
        nodes: list[list[tuple[int, list[Any]]]] = [[] for _ in self.query.nodes]
        ds: list[list[tuple[bytes, list[Any], Any]]] = [[] for _ in self.index.ds]
        meta: dict[str, Any] | None = None
        for name, key, value in entries:
            if name == META:
                meta = orjson.loads(value)
                continue
            owner, t = orjson.loads(key)
            if name == REL:
                rels[owner].append((int(value), t))
            elif name == NODE:
                nodes[owner].append((int(value), t))
            elif name == DIR:
                ds[owner].append((key, t, orjson.loads(value)))
            else:
                raise ValueError(f"unknown reservoir state entry {name}/{key!r}")
        if meta is None:
            raise ValueError("reservoir state entries without their meta entry")
        for e, alias in self.shared_nodes.items():
            nodes[e] = rels[alias]
        state = {
            "rels": {a: [[t, seq] for seq, t in sorted(rows)] for a, rows in rels.items()},
            "nodes": [[[t, seq] for seq, t in sorted(rows)] for rows in nodes],
            **(
                {}
                if meta.get("replayable")
                else {"ds": [[[v, dumped] for _, v, dumped in rows] for rows in ds]}
            ),
            **meta,
        }
        self._load(state, logging=True)


def _key(owner: str | int, t: Tup) -> bytes:
    """``[owner, [*t]]`` in JSON (a tuple is a JSON array as it is)."""
    return json_bytes((owner, t))
