"""Brute-force oracles for the reservoir tests: the join by nested loops over the alias relations."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.events import UpdateEvent
from ivmstream.options import parse_options
from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.options import OPTIONS

Row = tuple[Any, ...]

LINE3 = {
    "relations": {
        "G1": {"a": "int", "b": "int"},
        "G2": {"b": "int", "c": "int"},
        "G3": {"c": "int", "d": "int"},
    },
    "aliases": {"G1": "E", "G2": "E", "G3": "E"},
    "base_columns": {"E": ["src", "dst"]},
}
TWO_TABLE = {"relations": {"R": ["x", "y"], "S": ["y", "z"]}}
STAR3 = {"relations": {"R": ["s", "a"], "S": ["s", "b"], "T": ["s", "c"]}}
BRANCH = {"relations": {"R1": ["A", "B"], "R2": ["B", "C"], "R3": ["B", "D"], "R4": ["D", "E"]}}
DUMBBELL = {
    "relations": {
        "R1": ["x1", "x2"],
        "R2": ["x1", "x3"],
        "R3": ["x2", "x3"],
        "R7": ["x3", "x4"],
        "R4": ["x5", "x6"],
        "R5": ["x4", "x5"],
        "R6": ["x4", "x6"],
    },
    "bags": [["R1", "R2", "R3"], ["R7"], ["R5", "R6", "R4"]],
}
# A foreign-key join: item is Item's declared key, so each Sales tuple joins at most one Item tuple; the
# -opt strategies merge Sales and Item into one bag (docs/reservoir/algorithm.md §2.8), the others run
# on the aliases; all of them refuse an Item tuple whose item another one already has.
FK_MERGE = {
    "relations": {"Sales": ["item", "cust"], "Item": ["item", "cat"], "Cust": ["cust", "region"]},
    "keys": {"Item": ["item"]},
}
# A 4-cycle with a pendant, no decomposition declared: the engine derives one bag for the cycle (§4.1)
CYCLE4 = {
    "relations": {"R": ["a", "b"], "S": ["b", "c"], "T": ["c", "d"], "U": ["d", "a"], "V": ["d", "e"]},
}
QUERIES: dict[str, dict[str, Any]] = {
    "cycle4": CYCLE4,
    "line3": LINE3,
    "two": TWO_TABLE,
    "star3": STAR3,
    "branch": BRANCH,
    "dumbbell": DUMBBELL,
    "fk": FK_MERGE,
}


def options(query: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    return parse_options(OPTIONS, {**query, **more}, owner="test")


def engine(query: Mapping[str, Any], **more: Any) -> ReservoirEngine:
    return ReservoirEngine(options(query, **more))


def brute_join(e: ReservoirEngine) -> set[Row]:
    """Q over the engine's current alias relations, by nested loops (independent of the index)."""
    q = e.query
    aliases = list(q.relations)
    out = set()
    for combo in itertools.product(*(list(e.rels[a]) for a in aliases)):
        bind: dict[str, Any] = {}
        ok = True
        for a, t in zip(aliases, combo, strict=True):
            for c, v in zip(q.relations[a], t, strict=True):
                if bind.setdefault(c, v) != v:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            out.add(tuple(bind[c] for c in q.columns))
    return out


def event(relation: str, cols: Sequence[str], values: Sequence[Any], delta: int = 1) -> UpdateEvent:
    return UpdateEvent(relation, dict(zip(cols, values, strict=True)), delta)


def bases(e: ReservoirEngine) -> list[tuple[str, tuple[str, ...]]]:
    return list(e.query.bases.items())


class Model:
    """The base relations a stream leaves, kept apart from the engine: set semantics, declared keys,
    append_only. ``apply`` returns the refusal code an event must get (None: applied)."""

    def __init__(self, e: ReservoirEngine) -> None:
        self.query = e.query
        self.append_only = e.append_only
        self.sets: dict[str, set[Row]] = {b: set() for b in e.query.bases}

    def apply(self, relation: str, values: Sequence[Any], delta: int) -> str | None:
        t, present = tuple(values), self.sets[relation]
        if delta == 1:
            if t in present:
                return "duplicate-tuple"
            for alias in self.query.fanout[relation]:
                key = self.query.keys.get(alias)
                if key is None:
                    continue
                pos = [self.query.relations[alias].index(c) for c in key]
                if any(all(o[i] == t[i] for i in pos) for o in present):
                    return "key-violation"
            present.add(t)
            return None
        if delta != -1:
            return "set-semantics"
        if self.append_only:
            return "append-only"
        if t not in present:
            return "absent-tuple"
        present.remove(t)
        return None

    def relations(self) -> dict[str, set[Row]]:
        """Each alias's tuples: its base relation's."""
        return {a: set(self.sets[b]) for b, aliases in self.query.fanout.items() for a in aliases}
