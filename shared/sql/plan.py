"""What routing produces for a view: the service units that run it and how their results become
the view's rows.

A view runs on one or more *units*: a service instance with its configuration (built through the
service's declared options) fed by *feeds*, each turning one base table's events into events of one
of the service's relations (selections and derived columns applied at intake).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ivmstream.sql.expr import Fn
from ivmstream.sql.model import View

Row = dict[str, Any]


@dataclass
class Feed:
    """Base table events -> one service relation's events: kept when ``keep`` holds, with the given
    columns computed from the base row."""

    table: str
    relation: str
    columns: list[tuple[str, Fn]]
    keep: Fn | None = None

    def event(self, row: Row, delta: int) -> dict[str, Any] | None:
        if self.keep is not None and not self.keep(row):
            return None
        return {"relation": self.relation, "row": {c: f(row) for c, f in self.columns}, "delta": delta}


@dataclass
class Unit:
    """One service instance of a view."""

    service: str
    options: dict[str, Any]
    feeds: list[Feed]
    label: str = ""  # what this unit computes, for explain (e.g. "SUM(l.price)")


@dataclass
class ViewPlan:
    """A routed view: where it runs, why, its plan and cost, and how to turn results into rows."""

    view: View
    service: str
    strategy: str
    why: str
    plan: dict[str, Any]
    cost: str
    units: list[Unit]
    columns: list[str]
    assemble: Callable[[Sequence[Any]], list[list[Any]]]
    fields: Callable[[Sequence[Any]], dict[str, Any]] = field(default=lambda _results: {})

    def explain(self) -> dict[str, Any]:
        return {
            "view": self.view.name,
            "service": self.service,
            "strategy": self.strategy,
            "why": self.why,
            "plan": self.plan,
            "cost": self.cost,
            "columns": self.columns,
        }
