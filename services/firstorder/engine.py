"""First-order IVM of SUM/COUNT aggregates over a join with a residual predicate, and its baseline.

docs/firstorder/algorithm.md. The state is the base relations (bags, indexed on the variables the
delta plans probe by) and the materialised aggregates per group. An update to one relation evaluates
its delta query against the other relations' current contents (§3) and adds it to the aggregates, in
O(size of the other relations) per update in the worst case (O(matching tuples) through the indexes).
A self-join's occurrences are relations of their own, fed one event each: applied one after the
other, each delta is exact (δ(X ⋈ Y) = δX ⋈ Y + X' ⋈ δY).

``recompute`` (the baseline) keeps only the bags and evaluates the whole query whenever the result
is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ivmstream.sdk import Rejection, UpdateEvent, relation_columns

from .plan import DeltaPlan, Query

Bag = dict[tuple[Any, ...], int]
Accumulator = list[Any]  # [count, sum_1, ..., sum_k]
STRATEGIES = ("first-order", "recompute")


class FirstOrderEngine:
    """Strategy ``first-order``: materialised aggregates, one delta query per update (§3)."""

    def __init__(self, query: Query) -> None:
        self.query = query
        self.bags: dict[str, Bag] = {r: {} for r in query.relations}
        self.indexes: dict[tuple[str, tuple[int, ...]], dict[tuple[Any, ...], Bag]] = {
            ix: {} for ix in sorted(query.indexes())
        }
        self.by_relation: dict[str, list[tuple[tuple[int, ...], dict[tuple[Any, ...], Bag]]]] = {}
        for (rel, key), index in self.indexes.items():
            self.by_relation.setdefault(rel, []).append((key, index))
        self.groups: dict[tuple[Any, ...], Accumulator] = {}
        self.visited = 0  # tuples the delta queries enumerated (the work counter, §5)
        self.applied = 0

    # --- updates ---------------------------------------------------------------------------------

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejected: list[Rejection] = []
        relations = self.query.relations
        for i, ev in enumerate(events):
            cols = relations[ev.relation]
            tup = tuple(ev.row[c] for c in cols)
            held = self.bags[ev.relation].get(tup, 0)
            if held + ev.delta < 0:
                rejected.append(
                    Rejection(
                        i,
                        "absent-tuple",
                        f"delete of {-ev.delta} copies of {tup!r} from {ev.relation} which holds {held}",
                    )
                )
                continue
            self._maintain(ev.relation, tup, ev.delta)
            self._store(ev.relation, tup, ev.delta)
            self.applied += 1
        return rejected

    def _maintain(self, relation: str, tup: tuple[Any, ...], delta: int) -> None:
        """Add the delta query's result for one updated tuple to the aggregates."""
        add_to(self.groups, self.delta(relation, tup, delta))

    def delta(self, relation: str, tup: tuple[Any, ...], delta: int) -> dict[tuple[Any, ...], Accumulator]:
        """δQ for ``delta`` copies of ``tup`` in ``relation``, against the other relations as stored."""
        plan = self.query.plans[relation]
        env: list[Any] = [None] * len(self.query.variables)
        for col, pos in plan.bind:
            env[pos] = tup[col]
        out: dict[tuple[Any, ...], Accumulator] = {}
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
        for key, index in self.by_relation.get(relation, ()):
            k = tuple(tup[c] for c in key)
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
        groups = sorted(self.aggregates().items(), key=lambda kv: orjson.dumps(list(kv[0])))
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
            r: sorted(([list(t), m] for t, m in bag.items()), key=orjson.dumps)
            for r, bag in self.bags.items()
        }
        groups = sorted(([list(k), acc] for k, acc in self.groups.items()), key=orjson.dumps)
        return orjson.dumps({"bags": bags, "groups": groups, "applied": self.applied})

    def restore(self, data: bytes) -> None:
        snap = orjson.loads(data)
        self.bags = {r: {} for r in self.query.relations}
        for index in self.indexes.values():
            index.clear()
        for r, rows in snap["bags"].items():
            for values, m in rows:
                self._store(r, tuple(values), m)
        self.groups = {tuple(k): list(acc) for k, acc in snap["groups"]}
        self.applied = snap["applied"]


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
        {r: list(cols) for r, cols in relation_columns(options["relations"]).items()},
        options["free"] or [],
        options["predicate"],
        options["aggregates"],
    )


def make_engine(options: Mapping[str, Any]) -> FirstOrderEngine:
    """The service's engine factory: an empty engine of the chosen strategy."""
    cls = RecomputeEngine if options["strategy"] == "recompute" else FirstOrderEngine
    return cls(query_of(options))
