"""What every query plan (RPAI, DBToaster-style, recompute, cross-check) implements.

A plan sees only valid updates: the engine's ledger has already refused deletes of absent tuples and
non-positive volumes, so ``mult`` is a non-zero int (+k inserts k copies, -k deletes k present copies)
and rows carry every column of their relation, with exact values (int or Decimal). Plans are pure and
deterministic; the engine runs them under ``exact.exact_context()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

Row = Mapping[str, Any]
# One batch of one book side netted per price level: price -> [Σ multiplicity, Σ multiplicity·volume].
# Plans that define ``apply_levels(rel, changes)`` take a whole batch this way (docs/vwap/algorithm.md
# §3.6); the others get every event through ``update``.
LevelChanges = Mapping[Any, list[Any]]


class Plan(Protocol):
    def update(self, rel: str, row: Row, mult: int) -> None:
        """Apply ``mult`` copies of ``row`` to relation ``rel`` (negative: delete)."""
        ...

    def result(self) -> Any:
        """The query result as exact JSON (see ``exact.to_json``)."""
        ...

    def stats(self) -> dict[str, float]:
        """Numeric diagnostics (tree nodes, height, shifts, loop work); may be empty."""
        ...
