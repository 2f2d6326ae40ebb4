"""First-order IVM of SUM/COUNT aggregates over a join with a residual predicate, and its baseline.

docs/firstorder/algorithm.md. The state is the base relations (bags, indexed on the variables the
delta plans probe by) and the materialised aggregates per group. An update to one relation evaluates
its delta query against the other relations' current contents (§3) and adds it to the aggregates, in
O(size of the other relations) per update in the worst case (O(matching tuples) through the indexes).
Each plan runs as one generated Python function (``codegen.py``); the expression closures walk a plan
only when asked (``generated=False``, the reference) or when Python refuses the generated source.
A self-join's occurrences are relations of their own, fed one event each: applied one after the
other, each delta is exact (δ(X ⋈ Y) = δX ⋈ Y + X' ⋈ δY).

``recompute`` (the baseline) keeps only the bags and evaluates the whole query whenever the result
is read.

The state is checkpointed incrementally (``ivmstream.engine.IncrementalEngine``): map ``b`` holds one
entry per distinct bag tuple (key ``[relation, [values]]``, value its multiplicity), map ``g`` one per
group (key its values, value ``[count, sum_1, ...]``), map ``s`` the query the entries belong to and
the update counter. Once a checkpoint has taken the state, the engine logs the tuples and groups an
update touches, so the next checkpoint writes those entries only; before that it logs nothing. The
indexes are a function of the bags and are rebuilt on restore.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from ivmstream.sdk import (
    Entry,
    EntryChange,
    Rejection,
    UpdateEvent,
    json_bytes,
    relation_columns,
    state_bytes,
    state_loads,
)

from .codegen import DeltaFunction, generate
from .plan import DeltaPlan, Query

Bag = dict[tuple[Any, ...], int]
Accumulator = list[Any]  # [count, sum_1, ..., sum_k]
STRATEGIES = ("first-order", "recompute")
BAGS, GROUPS, SCALARS = "b", "g", "s"  # the maps of the incremental state


def _float_member(v: Any) -> Any:
    return 0.0 if v == 0 else v  # -0.0 == 0.0: one entry


def _number_member(v: Any) -> Any:
    return int(v) if type(v) is float and v.is_integer() else v  # 1.0 == 1: one entry


# Values equal in Python that print differently are one bag member or group: each is written in one
# form, so a tuple touched as 1 and stored as 1.0 names the same entry.
_MEMBER_FORM: dict[str, Callable[[Any], Any]] = {"float": _float_member, "number": _number_member}


class FirstOrderEngine:
    """Strategy ``first-order``: materialised aggregates, one delta query per update (§3)."""

    def __init__(self, query: Query, generated: bool = True) -> None:
        """``generated``: run the delta plans as generated Python (``codegen.py``); False walks them
        with the expression closures (the reference the generated code is tested against)."""
        self.query = query
        self.bags: dict[str, Bag] = {r: {} for r in query.relations}
        self.indexes: dict[tuple[str, tuple[int, ...]], dict[tuple[Any, ...], Bag]] = {
            ix: {} for ix in sorted(query.indexes())
        }
        self.by_relation: dict[str, list[tuple[tuple[int, ...], dict[tuple[Any, ...], Bag]]]] = {}
        for (rel, key), index in self.indexes.items():
            self.by_relation.setdefault(rel, []).append((key, index))
        # a relation's tuple from an event's row, and an index's key from a tuple, by one C call each
        self._tuple_of = {r: _getter(cols) for r, cols in query.relations.items()}
        self._keys_of = {r: [(_getter(k), index) for k, index in ixs] for r, ixs in self.by_relation.items()}
        self.groups: dict[tuple[Any, ...], Accumulator] = {}
        self.visited = 0  # tuples the delta queries enumerated (the work counter, §5)
        self.applied = 0
        self._logging = False  # whether touched tuples and groups are logged: once a checkpoint took state
        self._changed_tuples: set[tuple[str, tuple[Any, ...]]] = set()
        self._changed_groups: set[tuple[Any, ...]] = set()
        types = query.types
        self._tuple_forms = {r: [_MEMBER_FORM.get(t) for t in cols.values()] for r, cols in types.items()}
        self._group_forms = [_MEMBER_FORM.get(query.type_of(v)) for v in query.free]
        self._owner = json_bytes([query.describe_query(), type(self).__name__])
        self._factories = {r: made for r in query.relations if generated and (made := generate(query, r))}
        self._deltas: dict[str, DeltaFunction] = {}
        self._bind_deltas()

    def _bind_deltas(self) -> None:
        """The generated delta functions over the current bags and indexes (rebound when bags change)."""
        self._deltas = {
            r: factory(*(self.indexes[w] if isinstance(w, tuple) else self.bags[w] for _name, w in stores))
            for r, (factory, stores) in self._factories.items()
        }

    # --- updates ---------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejected: list[Rejection] = []
        tuple_of, bags, maintain, store = self._tuple_of, self.bags, self._maintain, self._store
        for i, ev in enumerate(events):
            relation, delta = ev.relation, ev.delta
            tup = tuple_of[relation](ev.row)
            held = bags[relation].get(tup, 0)
            if held + delta < 0:
                rejected.append(
                    Rejection(
                        i,
                        "absent-tuple",
                        f"delete of {-delta} copies of {tup!r} from {relation} which holds {held}",
                    )
                )
                continue
            maintain(relation, tup, delta)
            store(relation, tup, delta)
            if self._logging:
                self._changed_tuples.add((relation, tup))
            self.applied += 1
        return rejected

    def _maintain(self, relation: str, tup: tuple[Any, ...], delta: int) -> None:
        """Add the delta query's result for one updated tuple to the aggregates."""
        change = self.delta(relation, tup, delta)
        add_to(self.groups, change)
        if self._logging:
            self._changed_groups.update(change)

    def delta(self, relation: str, tup: tuple[Any, ...], delta: int) -> dict[tuple[Any, ...], Accumulator]:
        """δQ for ``delta`` copies of ``tup`` in ``relation``, against the other relations as stored."""
        out: dict[tuple[Any, ...], Accumulator] = {}
        generated = self._deltas.get(relation)
        if generated is not None:
            self.visited += generated(tup, delta, out)
            return out
        plan = self.query.plans[relation]
        env: list[Any] = [None] * len(self.query.variables)
        for col, pos in plan.bind:
            env[pos] = tup[col]
        if all(c.fn(env) for c in plan.checks):
            self._probe(plan, 0, env, delta, out)
        return out

    def _probe(
        self, plan: DeltaPlan, depth: int, env: list[Any], mult: int, out: dict[Any, Accumulator]
    ) -> None:
        if depth == len(plan.probes):
            self._emit(env, mult, out)
            return
        probe = plan.probes[depth]
        if probe.key:
            bucket = self.indexes[(probe.relation, probe.key)].get(tuple(env[p] for p in probe.key_env))
            if not bucket:
                return
        else:
            bucket = self.bags[probe.relation]
        self.visited += len(bucket)
        bind, checks = probe.bind, probe.checks
        for t, m in bucket.items():
            for col, pos in bind:
                env[pos] = t[col]
            if all(c.fn(env) for c in checks):
                self._probe(plan, depth + 1, env, mult * m, out)

    def _emit(self, env: list[Any], mult: int, out: dict[Any, Accumulator]) -> None:
        key = tuple(env[p] for p in self.query.free_env)
        acc = out.get(key)
        if acc is None:
            acc = out[key] = [0] * (1 + len(self.query.aggregates))
        acc[0] += mult
        for i, agg in enumerate(self.query.aggregates, 1):
            v = agg.fn(env)
            if v is not None:
                acc[i] += mult * v

    def _store(self, relation: str, tup: tuple[Any, ...], delta: int) -> None:
        bag = self.bags[relation]
        new = bag.get(tup, 0) + delta
        if new:
            bag[tup] = new
        else:
            bag.pop(tup, None)
        for key_of, index in self._keys_of.get(relation, ()):
            k = key_of(tup)
            bucket = index.setdefault(k, {})
            if new:
                bucket[tup] = new
            else:
                bucket.pop(tup, None)
                if not bucket:
                    del index[k]

    # --- results ---------------------------------------------------------------------------------

    def aggregates(self) -> dict[tuple[Any, ...], Accumulator]:
        return self.groups

    def result(self) -> dict[str, Any]:
        """One entry per group of non-zero count: its key, count (join rows) and sums."""
        names, free = self.query.aggregate_names, self.query.free
        groups = sorted(self.aggregates().items(), key=lambda kv: json_bytes(list(kv[0])))
        return {
            "groups": [
                {
                    "key": dict(zip(free, key, strict=True)),
                    "count": acc[0],
                    "sums": dict(zip(names, acc[1:], strict=True)),
                }
                for key, acc in groups
            ]
        }

    def stats(self) -> dict[str, float]:
        return {
            "tuples": float(sum(len(b) for b in self.bags.values())),
            "groups": float(len(self.groups)),
            "visited": float(self.visited),
            "applied": float(self.applied),
        }

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        bags = {
            r: sorted(([list(t), m] for t, m in bag.items()), key=json_bytes) for r, bag in self.bags.items()
        }
        groups = sorted(([list(k), acc] for k, acc in self.groups.items()), key=json_bytes)
        return state_bytes({"bags": bags, "groups": groups, "applied": self.applied})

    def restore(self, data: bytes) -> None:
        snap = state_loads(data)
        self._load(((r, values, m) for r, rows in snap["bags"].items() for values, m in rows), snap["groups"])
        self.applied = snap["applied"]
        self._logging = False  # whole snapshots: no change log until a checkpoint takes entries

    def _load(self, tuples: Iterable[tuple[str, list[Any], int]], groups: Iterable[list[Any]]) -> None:
        self.bags = {r: {} for r in self.query.relations}
        for index in self.indexes.values():
            index.clear()
        self._bind_deltas()
        for r, values, m in tuples:
            self._store(r, tuple(values), m)
        self.groups = {tuple(k): list(acc) for k, acc in groups}
        self._changed_tuples.clear()
        self._changed_groups.clear()

    # --- incremental checkpoints (ivmstream.engine.IncrementalEngine) -----------------------------

    def pending_changes(self) -> int:
        return len(self._changed_tuples) + len(self._changed_groups)

    def changed_entries(self) -> list[EntryChange]:
        """The entries of the tuples and groups touched since the previous call; at the first, all."""
        if not self._logging:
            return list(self.all_entries())
        out: list[EntryChange] = []
        for relation, tup in self._changed_tuples:
            m = self.bags[relation].get(tup)
            out.append((BAGS, self._tuple_key(relation, tup), json_bytes(m) if m else None))
        for key in self._changed_groups:
            acc = self.groups.get(key)
            out.append((GROUPS, self._group_key(key), state_bytes(acc) if acc is not None else None))
        self._changed_tuples.clear()
        self._changed_groups.clear()
        out.extend(self._scalar_entries())
        return out

    def all_entries(self) -> Iterator[Entry]:
        """Every entry; touched tuples and groups are logged from now on (a checkpoint takes the state)."""
        self._logging = True
        self._changed_tuples.clear()
        self._changed_groups.clear()
        return self._entries()

    def _entries(self) -> Iterator[Entry]:
        for relation, bag in self.bags.items():
            for tup, m in bag.items():
                yield BAGS, self._tuple_key(relation, tup), json_bytes(m)
        for key, acc in self.groups.items():
            yield GROUPS, self._group_key(key), state_bytes(acc)
        yield from self._scalar_entries()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        tuples: list[tuple[str, list[Any], int]] = []
        groups: list[list[Any]] = []
        scalars: dict[bytes, bytes] = {}
        for map_name, key, value in entries:
            if map_name == BAGS:
                relation, values = state_loads(key)
                if relation not in self.bags:
                    raise ValueError(f"firstorder state entry of relation {relation!r}, not of this query")
                tuples.append((relation, values, orjson.loads(value)))
            elif map_name == GROUPS:
                groups.append([state_loads(key), state_loads(value)])
            elif map_name == SCALARS:
                scalars[key] = value
            else:
                raise ValueError(f"unknown firstorder state map {map_name!r}")
        if scalars.get(b"query", self._owner) != self._owner:
            raise ValueError(
                f"firstorder state entries written for {scalars[b'query'].decode()}, "
                f"not {self._owner.decode()}"
            )
        self._load(tuples, groups)
        self.applied = int(orjson.loads(scalars.get(b"applied", b"0")))
        self._logging = True

    def _scalar_entries(self) -> list[Entry]:
        return [(SCALARS, b"query", self._owner), (SCALARS, b"applied", orjson.dumps(self.applied))]

    def _tuple_key(self, relation: str, tup: tuple[Any, ...]) -> bytes:
        forms = self._tuple_forms[relation]
        return state_bytes([relation, [f(v) if f else v for f, v in zip(forms, tup, strict=True)]])

    def _group_key(self, key: tuple[Any, ...]) -> bytes:
        return state_bytes([f(v) if f else v for f, v in zip(self._group_forms, key, strict=True)])


class RecomputeEngine(FirstOrderEngine):
    """Strategy ``recompute`` (the baseline, §4): the bags only; the query evaluated when read."""

    def _maintain(self, relation: str, tup: tuple[Any, ...], delta: int) -> None:
        return

    def aggregates(self) -> dict[tuple[Any, ...], Accumulator]:
        first = next(iter(self.query.relations))
        total: dict[tuple[Any, ...], Accumulator] = {}
        for tup, m in self.bags[first].items():
            add_to(total, self.delta(first, tup, m))
        return total


def _getter(positions: Sequence[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """``lambda x: tuple(x[p] for p in positions)``, by ``itemgetter`` (which gives a bare item for one)."""
    if len(positions) == 1:
        (only,) = positions
        return lambda x: (x[only],)
    if not positions:
        return lambda x: ()
    return operator.itemgetter(*positions)


def add_to(groups: dict[tuple[Any, ...], Accumulator], delta: Mapping[tuple[Any, ...], Accumulator]) -> None:
    """Add a delta's accumulators; a group whose count reaches 0 has no rows left and leaves."""
    for key, acc in delta.items():
        held = groups.get(key)
        if held is None:
            if acc[0]:
                groups[key] = acc
            continue
        for i, v in enumerate(acc):
            held[i] += v
        if held[0] == 0:
            del groups[key]


def query_of(options: Mapping[str, Any]) -> Query:
    return Query(
        relation_columns(options["relations"]),
        options["free"] or [],
        options["predicate"],
        options["aggregates"],
    )


def make_engine(options: Mapping[str, Any]) -> FirstOrderEngine:
    """The service's engine factory: an empty engine of the chosen strategy."""
    cls = RecomputeEngine if options["strategy"] == "recompute" else FirstOrderEngine
    return cls(query_of(options))
