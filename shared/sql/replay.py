"""``ivmstream sql replay``: every view over its tables' files, through the services' engines.

Each unit is an ``ivmstream.replay.Replay`` (the same codec and engine path as ``ivmstream replay``
and the workers); base-table events pass the unit's feeds (selections, derived columns) and are
encoded as the service's update events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from ivmstream.config import build_config
from ivmstream.events import SourceRecord
from ivmstream.replay import Rejected, Replay
from ivmstream.service import load_service
from ivmstream.sql.inputs import Event, InputChoice, read_events
from ivmstream.sql.model import Script
from ivmstream.sql.plan import Feed, ViewPlan
from ivmstream.sql.updateps import with_updates

CHUNK = 2000


def _default(v: Any) -> Any:
    if type(v) is Decimal:
        return str(v)
    raise TypeError(type(v).__name__)


def encode(event: dict[str, Any]) -> bytes:
    return orjson.dumps(event, default=_default)


@dataclass
class _UnitRun:
    replay: Replay
    buffer: list[SourceRecord] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def flush(self) -> None:
        if self.buffer:
            for item in self.replay.feed(self.buffer, chunk=len(self.buffer)):
                if isinstance(item, Rejected):
                    self.rejected.append(item)
            self.buffer = []


class ScriptReplay:
    """The running views of a script: feed base events, read rows at any point."""

    def __init__(self, plans: list[ViewPlan]) -> None:
        self.plans = plans
        self.runs: list[list[_UnitRun]] = []
        self.routes: dict[str, list[tuple[_UnitRun, Feed]]] = {}
        for plan in plans:
            runs = []
            for unit in plan.units:
                service = load_service(unit.service)
                run = _UnitRun(Replay(service, build_config(service, unit.options, source=plan.view.name)))
                runs.append(run)
                for feed in unit.feeds:
                    self.routes.setdefault(feed.table, []).append((run, feed))
            self.runs.append(runs)
        self.events = 0

    @property
    def tables(self) -> set[str]:
        return set(self.routes)

    def feed(
        self, events: Iterable[Event], every: int | None = None, on_every: Callable[[int], None] | None = None
    ) -> None:
        for lineno, (table, row, delta) in enumerate(events, 1):
            for run, feed in self.routes.get(table, ()):
                ev = feed.event(row, delta)
                if ev is not None:
                    run.buffer.append(SourceRecord(lineno, encode(ev)))
                    if len(run.buffer) >= CHUNK:
                        run.flush()
            self.events += 1
            if every and on_every is not None and self.events % every == 0:
                self.flush()
                on_every(self.events)
        self.flush()

    def flush(self) -> None:
        for runs in self.runs:
            for run in runs:
                run.flush()

    def results(self) -> list[dict[str, Any]]:
        """One JSON-ready object per view: view, service, columns, rows, plus the service's fields."""
        out = []
        for plan, runs in zip(self.plans, self.runs, strict=True):
            results = [r.replay.result() for r in runs]
            obj: dict[str, Any] = {
                "view": plan.view.name,
                "service": plan.service,
                "columns": plan.columns,
                "rows": plan.assemble(results),
            }
            obj.update(plan.fields(results))
            rejected = sum(len(r.rejected) for r in runs)
            if rejected:
                obj["rejected"] = rejected
            out.append(obj)
        return out


def replay_script(
    script: Script,
    plans: list[ViewPlan],
    choice: InputChoice,
    every: int | None = None,
    on_every: Callable[[list[dict[str, Any]], int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the plans over the files of the tables they read; the final results per view."""
    run = ScriptReplay(plans)
    events = with_updates(script, [p.view for p in plans], read_events(script, run.tables, choice))
    callback = (lambda n: on_every(run.results(), n)) if on_every is not None else None
    run.feed(events, every, callback)
    return run.results()
