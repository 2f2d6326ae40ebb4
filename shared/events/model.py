"""Update events: the one record format every service consumes, and the schema it is checked against.

An update is ``{"relation": name, "row": {column: value, ...}, "delta": k}`` with ``k`` a nonzero
integer multiplicity change. Validation is strict and precise because a silently coerced or dropped
field corrupts an incremental view forever: every rejection names its reason (``EventError.code``
is a stable, low-cardinality label for metrics and the dead-letter topic; ``detail`` is for humans).
The decoders that check records against a schema are in ``ivmstream.events.codec``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec
import orjson


class EventError(ValueError):
    """An update that cannot be applied, with a stable reason code and a precise explanation.

    The compiled decoder makes its instances without calling ``__init__`` (the same ``args``, ``code``
    and ``detail``, checked by tests/unit/hostile/test_cheap_refusal.py): keep the two in step. ``code`` and
    ``detail`` are slots, so that a flood of refused records allocates no attribute dict per record."""

    __slots__ = ("code", "detail")

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class UpdateEvent(msgspec.Struct, gc=False):
    """A decoded, validated update. ``key`` is the partition key value (``None`` without key_field).

    A msgspec struct: built once per record on the hot path, and its constructor runs in C. Like the
    dataclass it replaces it is mutable, unhashable and compares field by field (same class only), with
    the same ``repr``. ``gc=False``: events hold plain rows, never themselves, so they can take no part in
    a reference cycle and need no tracking by the cycle collector. Engines must treat events as read-only.
    """

    relation: str
    row: dict[str, Any]
    delta: int
    key: str | None = None

    def to_json(self, key_field: str | None = None) -> dict[str, Any]:
        row = dict(self.row)
        if key_field is not None and self.key is not None:
            row[key_field] = self.key
        return {"relation": self.relation, "row": row, "delta": self.delta}


def _encode_default(v: Any) -> Any:
    # orjson has no Decimal support; a decimal string is exact and is what the decimal type accepts.
    if type(v) is Decimal:
        return str(v)
    raise TypeError(f"Type is not JSON serializable: {type(v).__name__}")


def encode_event(event: UpdateEvent, key_field: str | None = None) -> bytes:
    return orjson.dumps(event.to_json(key_field), default=_encode_default)


# --- column types -------------------------------------------------------------------------------
# Each checker returns the coerced value or raises TypeError with what was expected.


def _check_int(v: Any) -> int:
    if type(v) is int:
        return v
    raise TypeError("an integer")


def _check_float(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    raise TypeError("a number")


def _check_number(v: Any) -> int | float:
    t = type(v)
    if t is int or t is float:
        return v
    raise TypeError("a number")


def _check_str(v: Any) -> str:
    if type(v) is str:
        return v
    raise TypeError("a string")


def _check_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    raise TypeError("a boolean")


def _check_decimal(v: Any) -> Decimal:
    """Exact decimal: integers, decimal strings, and floats by their shortest repr (what was written)."""
    t = type(v)
    if t is int:
        return Decimal(v)
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise TypeError("a finite decimal")
        return Decimal(repr(v))
    if t is str:
        try:
            d = Decimal(v)
        except InvalidOperation:
            raise TypeError("a decimal number or decimal string") from None
        if not d.is_finite():
            raise TypeError("a finite decimal")
        return d
    raise TypeError("a decimal number or decimal string")


def _check_exact(v: Any) -> int | Decimal:
    """Exact number: integers stay Python ints (the fast path), anything else is an exact Decimal."""
    if type(v) is int:
        return v
    return _check_decimal(v)


COLUMN_TYPES: dict[str, Callable[[Any], Any]] = {
    "int": _check_int,
    "float": _check_float,
    "number": _check_number,
    "str": _check_str,
    "bool": _check_bool,
    "decimal": _check_decimal,
    "exact": _check_exact,
}


@dataclass(frozen=True)
class Relation:
    """A relation a service accepts: its name and ordered, typed columns."""

    name: str
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        for col, typ in self.columns:
            if typ not in COLUMN_TYPES:
                raise ValueError(
                    f"relation {self.name!r}: column {col!r} has unknown type {typ!r} "
                    f"(known: {', '.join(COLUMN_TYPES)})"
                )
        names = [c for c, _ in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"relation {self.name!r}: duplicate column names")

    @classmethod
    def of(cls, name: str, **columns: str) -> Relation:
        return cls(name, tuple(columns.items()))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)


@dataclass(frozen=True)
class Schema:
    """The relations of one service instance plus the optional partition-key column."""

    relations: Mapping[str, Relation]
    key_field: str | None = None

    @classmethod
    def of(cls, *relations: Relation, key_field: str | None = None) -> Schema:
        return cls({r.name: r for r in relations}, key_field)

    def __post_init__(self) -> None:
        if self.key_field is not None:
            for rel in self.relations.values():
                if self.key_field in rel.column_names:
                    raise ValueError(
                        f"key_field {self.key_field!r} collides with a column of relation {rel.name!r}"
                    )
