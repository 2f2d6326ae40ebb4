"""The reservoir engine: a uniform sample of a join's results, kept as tuples arrive
(docs/reservoir/algorithm.md).

One class runs every strategy, since they share the event handling (base relations fanned out to
their aliases, set semantics, deletes) and differ in what they keep:

- rsjoin / rsjoin-opt: rounded counts (§2.3), grouped for -opt (§2.7); Algorithm L over each
  insert's virtual batch (§2.2);
- sjoin / sjoin-opt: exact counts (§3.1); the same sampler over exact, dummy-free batches;
- symhj: hash indexes only (§3.2); every new result enumerated, then Algorithm L;
- redraw: rounded counts; k fresh distinct draws through the super-root after every event (§3.2);
- rebuild: exact counts recomputed and k fresh draws after every event (§3.2).

Every random choice comes from one ``random.Random(seed)`` whose state is part of the snapshot, so a
replay or a restore reproduces the reservoir bit for bit.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from itertools import chain
from operator import itemgetter
from typing import Any

from ivmstream.sdk import Rejection, UpdateEvent
from ivmstream.services.reservoir import kernels
from ivmstream.services.reservoir.bags import BagLayer
from ivmstream.services.reservoir.exact import ExactJoin
from ivmstream.services.reservoir.index import JoinIndex, Tup
from ivmstream.services.reservoir.predicate import compile_predicate
from ivmstream.services.reservoir.query import Query, parse_query
from ivmstream.services.reservoir.sampler import ReplacementReservoir, Reservoir, random_order
from ivmstream.services.reservoir.state import NODE, REL, EngineState, LogKey

SAMPLING = ("rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt")  # the ones sampling virtual batches
REDRAWING = ("redraw", "rebuild")
_COUNTERS = ("events", "inserts", "deletes", "refills")
# the engine's plain inserts, one compiled call per run of them (None: ``apply`` takes each in Python)
_insert_run = None if kernels.native is None else kernels.native.insert_run


class ReservoirEngine(EngineState):
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = dict(options)
        self.query: Query = parse_query(options)
        q = self.query
        self.k: int = options["k"]
        self.seed: int = options["seed"]
        self.strategy: str = options["strategy"]
        self.with_replacement: bool = options["with_replacement"]
        self.append_only: bool = options["append_only"]
        self.theta: Callable[[Tup], bool] | None = (
            None if options["predicate"] is None else compile_predicate(options["predicate"], q.columns)
        )
        self.neighbours = q.neighbours()
        self.node_of = {a: i for i, n in enumerate(q.nodes) for a in n.members}
        # nodes of one alias: their tuples and arrival numbers are the alias's own, so the state keeps
        # them once, as the alias's entries (a node entry would repeat its key and value)
        self.shared_nodes = {i: n.members[0] for i, n in enumerate(q.nodes) if len(n.members) == 1}
        self.alias_pos = {a: tuple(q.columns.index(c) for c in cols) for a, cols in q.relations.items()}
        self.alias_of_row = {a: _projector(pos) for a, pos in self.alias_pos.items()}
        self.rng = random.Random(self.seed)
        self.rels: dict[str, dict[Tup, int]] = {a: {} for a in q.relations}  # tuple -> arrival number
        self.rel_seq = 0
        self.key_pos = {a: tuple(q.relations[a].index(c) for c in cols) for a, cols in q.keys.items()}
        self.holders: dict[str, dict[Tup, Tup]] = {a: {} for a in self.key_pos}  # alias -> key -> tuple
        # entries changed since the last checkpoint (None: deleted), kept only once a checkpoint has
        # taken the state (``_logging``): replay and engines never checkpointed record nothing
        self._log: dict[LogKey, int | None] = {}
        self._logging = False
        # while every tuple arrived by an insert (no delete, no bootstrap), the index is a function of
        # the arrival order: a checkpoint leaves its structures out and a restore re-inserts the alias
        # tuples in arrival order; the first delete makes the next checkpoint write them all (§9)
        self._replayable = True
        self._dir_stored = False  # whether the store holds the structures' entries
        self._meta_changed = True
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self.known_size: int | None = 0  # |Q_θ| when known exactly (None: only bounded)
        self.all_results = 0  # symhj/rebuild: |Q| without θ
        self.drawn: list[Tup] = []  # redraw/rebuild: the current draw
        # per alias, how many sampled rows hold each of its tuples, and the rows they count (_holding)
        self._held: dict[str, Counter[Tup]] = {}
        self._mirror: list[Tup] = []
        self._fresh_structures()
        self.sampler: Reservoir | ReplacementReservoir = (
            ReplacementReservoir(self.k, self.rng, self._sampler_theta())
            if self.with_replacement
            else Reservoir(self.k, self.rng, self._sampler_theta())
        )

    @classmethod
    def bootstrap(cls, options: Mapping[str, Any], bases: Mapping[str, Sequence[Tup]]) -> ReservoirEngine:
        """The engine over the given base relations, as if they had streamed in: the index built in
        the given order without sampling, then a sample drawn from the exact join (§8.1)."""
        engine = cls(options)
        for base, tuples in bases.items():
            for t in tuples:
                aliases = engine.query.fanout[base]
                clash = engine._key_clash(aliases, t)
                if clash is not None:
                    raise ValueError(f"the relations break a declared key: {t!r} in {base}: {clash}")
                for alias in aliases:
                    engine._add_rel(alias, t)
        engine._reload_nodes()
        engine._replayable = False  # loaded relation by relation, not in arrival order
        if engine.strategy in REDRAWING:
            engine._redraw()
        else:
            engine._resample([])
        return engine

    def _sampler_theta(self) -> Callable[[Tup], bool] | None:
        return None if self.strategy == "symhj" else self.theta  # symhj filters while enumerating

    def _fresh_structures(self) -> None:
        q = self.query
        self.bags = BagLayer(q.nodes, q.relations)
        self.index = JoinIndex(
            [n.attrs for n in q.nodes],
            self.neighbours,
            q.columns,
            exact=self.strategy in ("sjoin", "sjoin-opt"),
            grouped=self.strategy in ("rsjoin-opt", "sjoin-opt"),
            counting=self.strategy not in ("symhj", "rebuild"),
        )
        self.index.tracking = self._logging and self._dir_stored

    # --- events -----------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejected: list[Rejection] = []
        self._meta_changed = True
        run = _insert_run
        plan = None if run is None else self._insert_plan()
        if run is None or plan is None:
            for i, ev in enumerate(events):
                self._apply_event(i, ev, rejected)
            return rejected
        plain = self._plain_relations()
        i, n = 0, len(events)
        while i < n:
            if events[i].relation in plain:  # a run of plain inserts from here, in one compiled call
                i, sized = run(self, events, i, plan)
                if sized:
                    self._sized()
                if i == n:
                    break
            self._apply_event(i, events[i], rejected)
            i += 1
        return rejected

    def _apply_event(self, i: int, ev: UpdateEvent, rejected: list[Rejection]) -> None:
        q = self.query
        project = _project if kernels.native is None else kernels.native.project
        t = project(ev.row, q.bases[ev.relation])
        aliases = q.fanout[ev.relation]
        if ev.delta == 1:
            if t in self.rels[aliases[0]]:
                # refused, not ignored: the log's net count of every tuple is then 0 or 1 (§8.2)
                rejected.append(Rejection(i, "duplicate-tuple", f"insert of {t!r} present in {ev.relation}"))
                return
            clash = self._key_clash(aliases, t) if self.key_pos else None
            if clash is not None:
                rejected.append(Rejection(i, "key-violation", f"insert of {t!r} into {ev.relation}: {clash}"))
                return
            self.counters["events"] += 1
            for alias in aliases:
                self._insert_alias(alias, t)
            if self.strategy in REDRAWING:
                self._redraw()
        elif ev.delta == -1:
            if self.append_only:
                rejected.append(
                    Rejection(i, "append-only", f"delete of {t!r} from {ev.relation}: append_only")
                )
            elif t not in self.rels[aliases[0]]:
                rejected.append(Rejection(i, "absent-tuple", f"delete of {t!r} absent from {ev.relation}"))
            else:
                self._delete(aliases, t)
        else:
            rejected.append(
                Rejection(i, "set-semantics", f"delta {ev.delta} on {ev.relation}: relations are sets (±1)")
            )

    def _insert_plan(self) -> tuple[Any, ...] | None:
        """What the compiled run of plain inserts (``_arrivals.c``) works on, in its order; None where
        it does not apply: a strategy that does not sample virtual batches, declared keys, or an index
        without its compiled steps. An alias whose node is a bag leaves its events to ``apply``."""
        index = self.index
        if self.strategy not in SAMPLING or self.key_pos or index.native is None:
            return None
        plans = self.bags.plans
        direct = {a: e for a, e in self.node_of.items() if a not in plans}
        return (
            self.query.bases,
            self.query.fanout,
            self.rels,
            direct,
            self._log if self._logging else None,
            REL,
            index,
            self.sampler,
            isinstance(self.sampler, Reservoir),
            index.native.insert_sized,
            index.native.delta_get,
            partial,
        )

    def _plain_relations(self) -> set[str]:
        """The relations whose every alias is a node of its own: the compiled run takes their inserts,
        and an event of any other relation goes to ``_apply_event`` without entering it."""
        plans = self.bags.plans
        return {rel for rel, aliases in self.query.fanout.items() if not any(a in plans for a in aliases)}

    def _sized(self) -> None:
        """An insert entered the index and sized its virtual batch (``_insert_node``)."""
        index = self.index
        self.known_size = index.full_size() if index.exact and self.theta is None else None

    def _insert_alias(self, alias: str, t: Tup) -> None:
        seq = self._add_rel(alias, t)
        self.counters["inserts"] += 1
        e = self.node_of[alias]
        if alias in self.bags.plans:
            for b in self.bags.insert(alias, t):
                self._insert_node(e, b, None)
        else:  # a node of this alias alone: its tuple is t, numbered as in the alias (_shared_seq)
            self._insert_node(e, t, seq)

    def _shared_seq(self, alias: str, b: Tup) -> int | None:
        """A node of one alias numbers its tuples with the alias's own arrival numbers (the same int
        objects, so the numbering costs no memory); a bag of several numbers its own."""
        return None if alias in self.bags.plans else self.rels[alias][b]

    # --- declared keys (§2.8) -------------------------------------------------------------------

    def _key_of(self, alias: str, t: Tup) -> Tup:
        return tuple(t[i] for i in self.key_pos[alias])

    def _key_clash(self, aliases: Sequence[str], t: Tup) -> str | None:
        """Why inserting t (not present) into these aliases would break a declared key, or None."""
        for alias in aliases:
            if alias not in self.key_pos:
                continue
            held = self.holders[alias].get(self._key_of(alias, t))
            if held is not None:
                cols = ", ".join(self.query.keys[alias])
                return f"{alias} already holds {held!r} with the same key ({cols})"
        return None

    def _hold_keys(self) -> None:
        """The key index of every keyed alias, from its tuples (it is derived state, never stored)."""
        self.holders = {a: {} for a in self.key_pos}
        for alias in self.key_pos:
            for t in self.rels[alias]:
                self.holders[alias][self._key_of(alias, t)] = t

    def _add_rel(self, alias: str, t: Tup) -> int:
        """Record t in the alias under the next arrival number, and return that number."""
        if alias in self.key_pos:
            self.holders[alias][self._key_of(alias, t)] = t
        seq = self.rels[alias][t] = self.rel_seq
        if self._logging:
            self._log[(REL, alias, t)] = seq
        self.rel_seq += 1
        return seq

    def _insert_node(self, e: int, b: Tup, seq: int | None) -> None:
        index = self.index
        if self.strategy in SAMPLING:  # the insert and its virtual batch's size in one step
            native = index.native  # the compiled steps called straight, not through the index's methods
            sized = index.insert_sized(e, b, seq) if native is None else native.insert_sized(index, e, b, seq)
            if sized is None:
                return
            if seq is None and self._logging:  # a node of one alias (seq given) is logged by its alias
                self._log[(NODE, e, b)] = index.nodes[e].tuples[b]
            size, radices = sized
            if size:
                get = (
                    index.batch_reader(e, b, radices)
                    if native is None
                    else partial(native.delta_get, index, e, b, radices)
                )
                self.sampler.update(size, get)
            self._sized()
            return
        if not index.insert(e, b, seq):
            return
        if seq is None and self._logging:
            self._log[(NODE, e, b)] = index.nodes[e].tuples[b]
        if self.strategy == "symhj":
            rows = index.delta_rows(e, b)
            self.all_results += len(rows)
            if self.theta is not None:
                rows = [r for r in rows if self.theta(r)]
            self.sampler.update(len(rows), rows.__getitem__)
            self.known_size = (self.known_size or 0) + len(rows)

    # --- redraw and rebuild (§3.2) ---------------------------------------------------------------

    def _population(self) -> tuple[int, Callable[[int], Tup | None]]:
        """The positions to draw from and their access: J through the super-root (redraw) or the
        exact join's ranks (rebuild)."""
        if self.strategy == "redraw":
            return self.index.full_size(), self.index.full_get
        exact = self._exact()
        self.all_results = exact.count
        return exact.count, exact.get

    def _qualifies(self, row: Tup | None) -> bool:
        return row is not None and (self.theta is None or self.theta(row))

    def _redraw(self) -> None:
        n, get = self._population()
        found: list[Tup] = []
        exhausted = True
        for z in random_order(self.rng, n):
            row = get(z)
            if self._qualifies(row):
                found.append(row)  # type: ignore[arg-type]
                if len(found) == self.k or self.with_replacement:
                    exhausted = False
                    break
        if self.with_replacement and found:
            found = []
            while len(found) < self.k:
                row = get(self.rng.randrange(n))
                if self._qualifies(row):
                    found.append(row)  # type: ignore[arg-type]
        self.drawn = found
        if self.strategy == "rebuild" and self.theta is None:
            self.known_size = n
        else:
            self.known_size = len(found) if exhausted else None

    # --- deletes (§5) ---------------------------------------------------------------------------

    def _exact(self) -> ExactJoin:
        q = self.query
        return ExactJoin(
            [n.attrs for n in q.nodes],
            self.neighbours,
            q.columns,
            [self.index.tuples(e) for e in range(len(q.nodes))],
        )

    def _delete(self, aliases: Sequence[str], t: Tup) -> None:
        """Delete t from every alias of its base (§5): out of the relations, the bags and the index (no
        rebuild), then the sampled results holding it are replaced, so the sample is again a uniform
        k-subset of the current join."""
        self.counters["events"] += 1
        self.counters["deletes"] += 1
        self._replayable = False
        index, logging = self.index, self._logging
        lost = lost_qualifying = 0  # symhj: the results t was part of, enumerated as on an insert
        for alias in aliases:
            del self.rels[alias][t]
            if logging:
                self._log[(REL, alias, t)] = None
            if alias in self.key_pos:
                del self.holders[alias][self._key_of(alias, t)]
            e = self.node_of[alias]
            for b in self.bags.remove(alias, t):
                if self.strategy == "symhj":
                    rows = index.delta_rows(e, b)
                    lost += len(rows)
                    lost_qualifying += sum(1 for r in rows if self.theta is None or self.theta(r))
                index.remove(e, b)
                if logging:
                    self._log[(NODE, e, b)] = None
        if self.strategy in REDRAWING:
            self._redraw()
            return
        sampler = self.sampler
        held = sampler.sample if isinstance(sampler, Reservoir) else sampler.slots
        slots = self._holding(held, aliases, t)
        self.counters["refills"] += len(slots)
        if self.strategy == "symhj":  # no counts to draw through: the exact join, from scratch
            self.all_results -= lost
            self.known_size = (self.known_size or 0) - lost_qualifying
            if slots:
                gone = set(slots)
                self._resample([r for i, r in enumerate(held) if i not in gone])
            return
        if slots:
            sampler.evict(slots, index.full_size(), index.full_get)
        self.known_size = index.full_size() if index.exact and self.theta is None else None

    def _holding(self, rows: list[Tup], aliases: Sequence[str], t: Tup) -> list[int]:
        """The positions of the sampled rows that hold t in one of these aliases. A sampled result
        rarely does, so per alias a count of its tuples in the sample answers first, kept in step with
        the sampler's journal of written slots (rebuilt when it replaced the sample wholesale)."""
        sampler = self.sampler
        if isinstance(sampler, Reservoir):
            held, mirror = self._held, self._mirror
            if sampler.journal is None:
                held.clear()
                for a, project in self.alias_of_row.items():
                    held[a] = Counter(map(project, rows))
                mirror[:] = rows
                sampler.journal = []
            else:
                for j in sampler.journal:
                    row = rows[j]
                    for a, project in self.alias_of_row.items():
                        if j < len(mirror):
                            held[a][project(mirror[j])] -= 1
                        held[a][project(row)] += 1
                    if j < len(mirror):
                        mirror[j] = row
                    else:
                        mirror.append(row)
                sampler.journal.clear()
            if not any(held[a][t] for a in aliases):
                return []
        slots: set[int] = set()
        for a in aliases:
            slots.update(i for i, x in enumerate(map(self.alias_of_row[a], rows)) if x == t)
        return sorted(slots)

    def _resample(self, kept: list[Tup]) -> None:
        """Set the sampler to a uniform sample of the current join that keeps ``kept`` (a uniform
        subset of the survivors), drawing the rest from the exact join, as if the stream so far had
        been sampled item by item (§5)."""
        exact = self._exact()
        self.all_results = exact.count
        get: Callable[[int], Tup]
        everything: Callable[[], Iterator[Tup]]
        if self.theta is None:
            population, get, everything = exact.count, exact.get, exact.rows
        else:
            qualifying = [r for r in exact.rows() if self.theta(r)]
            population = len(qualifying)
            get, everything = qualifying.__getitem__, qualifying.__iter__
        self.known_size = population
        sampler = self.sampler
        if isinstance(sampler, ReplacementReservoir):
            slots: list[Tup | None] = [r if r in kept else None for r in sampler.slots] or [None] * self.k
            sampler.reset(slots, population, lambda: get(self.rng.randrange(population)))
            return
        if population <= self.k:
            sampler.reset(list(everything()), population)
            return
        have = set(kept)
        for z in random_order(self.rng, population):
            if len(kept) == self.k:
                break
            row = get(z)
            if row not in have:
                have.add(row)
                kept.append(row)
        sampler.reset(kept, population)

    def _reload_nodes(self) -> None:
        """Fill fresh bags and index from the alias relations, in their order, without sampling."""
        for alias, rel in self.rels.items():
            e = self.node_of[alias]
            for t in rel:
                for b in self.bags.insert(alias, t):
                    self.index.insert(e, b, self._shared_seq(alias, b))

    # --- results ----------------------------------------------------------------------------------

    def rows(self) -> list[Tup]:
        """The current sample (in slot order)."""
        return list(self.drawn) if self.strategy in REDRAWING else self.sampler.rows()

    def join_size(self) -> int | None:
        """|Q_θ| where this strategy knows it exactly, else None."""
        rows = self.rows()
        if not self.with_replacement and len(rows) < self.k:
            return len(rows)
        return self.known_size

    def join_size_bound(self) -> int:
        """|J| >= |Q|: the index's super-root length (exact for sjoin; |Q| for symhj and rebuild)."""
        return self.index.full_size() if self.index.counting else self.all_results

    def result(self) -> dict[str, Any]:
        cols = self.query.columns
        rows = self.rows()
        # a sample of ints sorted and made dicts in one compiled pass (_sample_rows.c), else in Python
        sample = None if kernels.native is None else kernels.native.sample_dicts(cols, rows)
        if sample is None:
            # ordered by _canonical; rows of ints alone sort the same by their values, without a key per row
            ints_only = set(map(type, chain.from_iterable(rows))) <= {int}
            rows = sorted(rows) if ints_only else sorted(rows, key=_canonical)
            sample = list(map(dict, map(partial(zip, cols, strict=True), rows)))
        return {
            "k": self.k,
            "sample": sample,
            "join_size": self.join_size(),
            "join_size_bound": self.join_size_bound(),
            "stats": {**self.stats(), "decomposition": self.decomposition()},
        }

    def decomposition(self) -> dict[str, Any]:
        """How the index nodes came about (declared, derived for a cycle or by a key merge) and their bags."""
        q = self.query
        return {"derived": q.derived, "bags": [list(n.members) for n in q.nodes]}

    def stats(self) -> dict[str, float]:
        """Work counters and gauges of this engine. Counts stay integers (results carry them); only
        the sampler's weight ``w`` is a float."""
        c = self.sampler.counters
        out: dict[str, float] = {k: int(v) for k, v in self.counters.items()}
        out.update({k: int(v) for k, v in c.as_dict().items()})
        out.update(
            places=int(self.index.places),
            propagations=int(self.index.propagations),
            retrieves=int(self.index.retrieves),
            sample_size=len(self.drawn if self.strategy in REDRAWING else self.sampler.rows()),
        )
        w = getattr(self.sampler, "w", None)
        if w is not None:
            out["w"] = float(w)
        return out


def _canonical(row: Tup) -> tuple[tuple[str, Any], ...]:
    return tuple((type(v).__name__, v) for v in row)


def _project(row: Mapping[str, Any], columns: tuple[str, ...]) -> Tup:
    """An event's tuple (``project`` of the compiled steps, which also stops the collector tracking it)."""
    return tuple(row[c] for c in columns)


def _projector(pos: tuple[int, ...]) -> Callable[[Tup], Tup]:
    """The alias tuple within a result row (a tuple even for one column)."""
    if len(pos) == 1:
        i = pos[0]
        return lambda row: (row[i],)
    return itemgetter(*pos)
