"""The query a firstorder engine maintains and its delta plans (docs/firstorder/algorithm.md §1, §3).

The query is ``SELECT free, COUNT(*), SUM(a_1), ... FROM R_1 NATURAL JOIN ... R_n WHERE θ GROUP BY
free``: relations join on their shared variable names, θ is a predicate over any variables (the
residual predicate no view tree factorizes), each aggregate argument an expression over any variables.

For each relation R, a delta plan evaluates ``δR ⋈ (the other relations)`` for one tuple of δR: the
other relations are probed in a fixed order, each through an index on the variables bound before it
(by R's tuple and the relations probed earlier), or scanned whole when none is; each conjunct of θ is
tested at the first probe after which all its variables are bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .expressions import Expression, compile_expression, conjuncts


@dataclass(frozen=True)
class Probe:
    """One step of a delta plan: look up ``relation`` by the columns ``key`` (values read from the
    environment at ``key_env``), bind its other columns (``bind``: column index -> environment
    position), then test ``checks``."""

    relation: str
    key: tuple[int, ...]
    key_env: tuple[int, ...]
    bind: tuple[tuple[int, int], ...]
    checks: tuple[Expression, ...]


@dataclass(frozen=True)
class DeltaPlan:
    relation: str
    bind: tuple[tuple[int, int], ...]  # the updated tuple's columns -> environment positions
    checks: tuple[Expression, ...]  # conjuncts over the updated relation's variables alone
    probes: tuple[Probe, ...]


class Query:
    """Relations, variables, the predicate's conjuncts, the free variables and the aggregates."""

    def __init__(
        self,
        relations: Mapping[str, Mapping[str, str]],
        free: Sequence[str],
        predicate: str | None,
        aggregates: Mapping[str, str],
    ) -> None:
        """``relations``: ``{relation: {column: type}}`` in declaration order."""
        self.types = {r: dict(cols) for r, cols in relations.items()}
        self.relations = {r: tuple(cols) for r, cols in relations.items()}
        self.variables: list[str] = []
        for cols in self.relations.values():
            self.variables.extend(c for c in cols if c not in self.variables)
        self.position = {v: i for i, v in enumerate(self.variables)}
        unknown = [v for v in free if v not in self.position]
        if unknown:
            raise ValueError(f"free names {unknown}, not variables of the join (variables: {self.variables})")
        if len(set(free)) != len(free):
            raise ValueError(f"free repeats a variable: {list(free)}")
        self.free = tuple(free)
        self.free_env = tuple(self.position[v] for v in free)
        self.predicate = predicate
        self.conjuncts = (
            [compile_expression(c, self.position) for c in conjuncts(predicate)] if predicate else []
        )
        self.aggregate_names = tuple(aggregates)
        self.texts = tuple(aggregates.values())
        self.aggregates = tuple(compile_expression(a, self.position) for a in aggregates.values())
        self.plans = {r: self._plan(r) for r in self.relations}

    def type_of(self, variable: str) -> str:
        """The declared type of a variable (that of the first relation holding it)."""
        return next(cols[variable] for cols in self.types.values() if variable in cols)

    def describe_query(self) -> list[Any]:
        """The query as data: what incrementally stored entries must have been written for."""
        aggregates = dict(zip(self.aggregate_names, self.texts, strict=True))
        return [self.types, list(self.free), self.predicate, aggregates]

    def _plan(self, relation: str) -> DeltaPlan:
        """Greedy probe order: next the relation with the most variables already bound (a lookup),
        ties in declaration order; a relation sharing none is scanned."""
        bound = set(self.relations[relation])
        pending = list(self.conjuncts)
        checks = tuple(c for c in pending if c.variables <= bound)
        pending = [c for c in pending if c not in checks]
        probes = []
        rest = [r for r in self.relations if r != relation]
        while rest:
            nxt = max(rest, key=lambda r: sum(c in bound for c in self.relations[r]))
            rest.remove(nxt)
            cols = self.relations[nxt]
            key = tuple(i for i, c in enumerate(cols) if c in bound)
            bind = tuple((i, self.position[c]) for i, c in enumerate(cols) if c not in bound)
            bound |= set(cols)
            now = tuple(c for c in pending if c.variables <= bound)
            pending = [c for c in pending if c not in now]
            probes.append(Probe(nxt, key, tuple(self.position[cols[i]] for i in key), bind, now))
        own = tuple((i, self.position[c]) for i, c in enumerate(self.relations[relation]))
        return DeltaPlan(relation, own, checks, tuple(probes))

    def indexes(self) -> set[tuple[str, tuple[int, ...]]]:
        """The (relation, key columns) indexes the delta plans probe."""
        return {(p.relation, p.key) for plan in self.plans.values() for p in plan.probes if p.key}

    def describe(self) -> dict[str, list[str]]:
        """Each relation's delta plan, readable."""
        out = {}
        for r, plan in self.plans.items():
            steps = []
            for p in plan.probes:
                cols = self.relations[p.relation]
                how = f"lookup on ({', '.join(cols[i] for i in p.key)})" if p.key else "scan"
                tests = f", test {' and '.join(c.text for c in p.checks)}" if p.checks else ""
                steps.append(f"{p.relation}: {how}{tests}")
            out[r] = steps
        return out
