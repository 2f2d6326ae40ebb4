"""Events received per declared relation, so a relation that never receives one is reported.

A view over several relations computed from only some of them is silently wrong (an order-book query
reading bids and asks, fed bids only, answers 0). ``replay`` and the worker count the valid events of
each relation and say once which declared relation got none: the worker after a given amount of input
and at shutdown, ``replay`` at the end.

Counting works on a batch's decoded groups: for one relation it is a sum of list lengths, otherwise one
list of the events' relations counted once per declared relation (``list.count`` compares the decoder's
shared relation strings by identity first), both looping in C and cheaper than a ``Counter``'s dict
update per event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any

from ivmstream.events.codec import UpdateEvent
from ivmstream.events.columns import EventColumns

_relation = attrgetter("relation")


class RelationCoverage:
    def __init__(self, relations: Iterable[str], report_after: int | None = None) -> None:
        """``relations``: the declared ones; ``report_after``: input records after which ``observe``
        reports the silent ones (None: only ``final`` does)."""
        self.relations = tuple(relations)
        self.counts: dict[str, int] = dict.fromkeys(self.relations, 0)
        self.report_after = report_after
        self.records = 0
        self._only = self.relations[0] if len(self.relations) == 1 else None
        self._reported: set[str] = set()
        self._checked = report_after is None

    def count(self, groups: Iterable[Sequence[UpdateEvent]] | Iterable[EventColumns]) -> dict[str, int]:
        """Add one batch's valid events (its per-key groups, as events or as columns); returns the
        batch's count per relation."""
        given: list[Any] = groups if isinstance(groups, list) else list(groups)
        if given and given[0].__class__ is EventColumns:
            batch: dict[str, int] = {}
            for columns in given:
                for relation, part in columns.relations.items():
                    batch[relation] = batch.get(relation, 0) + len(part)
            return self._add(batch)
        groups = given
        if self._only is not None:
            n = sum(map(len, groups))
            batch = {self._only: n} if n else {}
        else:
            names: list[str] = []
            for group in groups:
                names += map(_relation, group)
            batch = {}
            for relation in self.relations:
                n = names.count(relation)
                if n:
                    batch[relation] = n
            if sum(batch.values()) != len(names):  # undeclared relations (not from a decoder): each counted
                for relation in set(names).difference(self.relations):
                    batch[relation] = names.count(relation)
        return self._add(batch)

    def _add(self, batch: dict[str, int]) -> dict[str, int]:
        counts = self.counts
        for relation, n in batch.items():
            counts[relation] = counts.get(relation, 0) + n
        return batch

    def silent(self) -> list[str]:
        """Declared relations that have received no event so far."""
        return [r for r in self.relations if not self.counts.get(r)]

    def observe(self, records: int) -> list[str]:
        """After ``records`` more input records: the silent relations to report now (each only once)."""
        self.records += records
        if self._checked or self.report_after is None or self.records < self.report_after:
            return []
        self._checked = True
        return self._take_silent()

    def final(self) -> list[str]:
        """At the end: the silent relations not reported yet."""
        self._checked = True
        return self._take_silent()

    def _take_silent(self) -> list[str]:
        news = [r for r in self.silent() if r not in self._reported]
        self._reported.update(news)
        return news
