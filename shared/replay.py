"""Run a service's engine offline over an input file: the reference the streaming runtime must match.

Uses the same codec, validation and per-key engine split as the runtime, so ``replay`` of a file and
``produce`` + ``run`` of the same file reach the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ivmstream.config import ServiceConfig, schema_of
from ivmstream.engine import Engine
from ivmstream.events import EventCodec, EventError, SourceRecord, UpdateEvent
from ivmstream.events.coverage import RelationCoverage
from ivmstream.service import ServiceDefinition

KEYLESS = ""


@dataclass
class Rejected:
    lineno: int
    code: str
    detail: str
    relation: str | None = (
        None  # the relation its reader wrote, when known (which file, of interleaved tables)
    )


@dataclass
class Replay:
    service: ServiceDefinition
    config: ServiceConfig
    engines: dict[str, Engine] = field(default_factory=dict)
    applied: int = 0
    rejected: int = 0

    def __post_init__(self) -> None:
        self.codec = EventCodec(schema_of(self.service, self.config))
        self.coverage = RelationCoverage(self.codec.schema.relations)

    def engine(self, key: str) -> Engine:
        e = self.engines.get(key)
        if e is None:
            e = self.engines[key] = self.service.engine(self.config.options)
        return e

    def feed(self, records: Iterable[SourceRecord], chunk: int = 1000) -> Iterator[Rejected | int]:
        """Apply records in chunks; yields each rejection and, after each chunk, the applied count."""
        buf: list[SourceRecord] = []
        for rec in records:
            if rec.error is not None:
                self.rejected += 1
                yield Rejected(rec.lineno, rec.code or "unreadable-line", rec.error, rec.relation)
                continue
            buf.append(rec)
            if len(buf) >= chunk:
                yield from self._apply(buf)
                buf = []
                yield self.applied
        if buf:
            yield from self._apply(buf)
            yield self.applied

    def _apply(self, recs: list[SourceRecord]) -> Iterator[Rejected]:
        per_key: dict[str, tuple[list[UpdateEvent], list[SourceRecord]]] = {}
        keyed = self.codec.schema.key_field is not None
        for rec, item in zip(recs, self.codec.decode_many(r.value for r in recs), strict=True):
            if isinstance(item, EventError):
                self.rejected += 1
                yield Rejected(rec.lineno, item.code, item.detail, rec.relation)
                continue
            key = item.key if keyed and item.key is not None else KEYLESS
            events, sources = per_key.setdefault(key, ([], []))
            events.append(item)
            sources.append(rec)
        self.coverage.count(events for events, _sources in per_key.values())
        for key, (events, sources) in per_key.items():
            rejections = self.engine(key).apply(events)
            for r in rejections:
                self.rejected += 1
                yield Rejected(sources[r.index].lineno, r.code, r.detail, sources[r.index].relation)
            self.applied += len(events) - len(rejections)

    def silent_relations(self) -> list[str]:
        """Declared relations no valid event of the input belonged to (the view ignored them)."""
        return self.coverage.silent()

    def result(self) -> Any:
        """The engine's result without key_field; ``{key: result}`` (sorted) with one."""
        if self.codec.schema.key_field is None:
            return self.engine(KEYLESS).result()
        return {k: self.engines[k].result() for k in sorted(self.engines)}


def replay_all(
    service: ServiceDefinition,
    config: ServiceConfig,
    records: Iterable[SourceRecord],
    on_reject: Callable[[Rejected], None] | None = None,
) -> Replay:
    run = Replay(service, config)
    for item in run.feed(records):
        if isinstance(item, Rejected) and on_reject is not None:
            on_reject(item)
    return run
