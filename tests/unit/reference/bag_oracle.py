"""The reference engine's brute-force oracle: one multiset per relation, with the engine's rule that a
delete taking a tuple's count below zero is refused and changes nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ivmstream.events import UpdateEvent


def brute(events: list[UpdateEvent], relations: Iterable[str]) -> tuple[dict[str, Counter], list[int]]:
    """The bags after ``events`` and the indexes of the events refused."""
    bags: dict[str, Counter] = {r: Counter() for r in relations}
    refused = []
    for i, ev in enumerate(events):
        tup = tuple(ev.row.values())
        if bags[ev.relation][tup] + ev.delta < 0:
            refused.append(i)
            continue
        bags[ev.relation][tup] += ev.delta
    return bags, refused
