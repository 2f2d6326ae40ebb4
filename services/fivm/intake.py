"""Event intake: typed, canonical tuples and batch consolidation (docs/algorithms/fivm.md §1.2, §2.12).

Each event names a relation, carries every column of it and a non-zero integer multiplicity change.
Values are made canonical once, here, so that join keys compare by exact equality: floats are finite
and ``-0.0`` becomes ``0.0``; ints given for float columns become floats; ints must fit int64 (state
stores and Spark keep int64 keys). NULL never joins (natural-join semantics), so an event with a NULL
value is refused rather than stored. Deletes of absent tuples are *not* refused: relations are
Z-relations and a negative multiplicity is legal (§2.12).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from services.fivm.query import Query
from services.fivm.views import Key
from shared.engine import Rejection
from shared.events import UpdateEvent

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class Intake:
    def __init__(self, query: Query) -> None:
        self.columns: dict[str, tuple[tuple[str, str], ...]] = {
            r.name: tuple(zip(r.columns, r.types, strict=True)) for r in query.relations
        }
        self.aliases = {o.name: o.base for o in query.occurrences if o.is_alias}

    def parse(self, i: int, ev: UpdateEvent) -> tuple[str, Key, int] | Rejection:
        """(relation, canonical tuple in column order, multiplicity), or why the event is refused."""
        rel = ev.relation
        cols = self.columns.get(rel)
        if cols is None:
            base = self.aliases.get(rel)
            hint = f"; {rel!r} is an alias of {base!r}, send {base!r} events" if base else ""
            return Rejection(i, "unknown-relation", f"no relation {rel!r}{hint}")
        m = ev.delta
        if m.__class__ is not int:
            return Rejection(i, "bad-delta", f"delta must be a non-zero integer, got {m!r}")
        if not m:
            return Rejection(i, "zero-delta", "delta must be a non-zero integer, got 0")
        row = ev.row
        if len(row) != len(cols):
            extra = [c for c in row if c not in dict(cols)]
            if extra:
                return Rejection(i, "unknown-column", f"{rel} has no column(s) {extra}")
        values: list[Any] = []
        for col, typ in cols:
            try:
                v = row[col]
            except KeyError:
                return Rejection(i, "missing-column", f"{rel}.{col} is missing")
            cv = canonical(v, typ)
            if cv.__class__ is Refused:
                return Rejection(i, cv.code, f"{rel}.{col}: {cv.detail}")
            values.append(cv)
        return rel, tuple(values), m


class Refused:
    """Why a value cannot be stored (a Rejection without the event index)."""

    __slots__ = ("code", "detail")

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail


def canonical(v: Any, typ: str) -> Any:
    """The canonical value of ``v`` for a column of type ``typ``, or ``Refused``."""
    cls = v.__class__
    if v is None:
        return Refused("null-value", "NULL never joins; the event is refused")
    if typ == "str":
        return v if cls is str else Refused("wrong-type", f"expected a string, got {v!r}")
    if typ == "int":
        if cls is not int:
            return Refused("wrong-type", f"expected an integer, got {v!r}")
        if not INT64_MIN <= v <= INT64_MAX:
            return Refused("int-out-of-range", f"{v} is outside int64")
        return v
    if cls is int:
        if not INT64_MIN <= v <= INT64_MAX:
            return Refused("int-out-of-range", f"{v} is outside int64")
        return float(v)
    if cls is not float:
        return Refused("wrong-type", f"expected a number, got {v!r}")
    if not math.isfinite(v):
        return Refused("non-finite", f"{v!r} is not a finite number")
    return v + 0.0  # -0.0 + 0.0 == +0.0: one encoding per value


def consolidate(batch: Mapping[Key, int]) -> dict[Key, int]:
    """Drop tuples whose changes cancelled (§1.2: duplicates and insert/delete pairs net out first)."""
    return {t: m for t, m in batch.items() if m}
