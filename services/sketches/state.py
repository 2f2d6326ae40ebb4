"""Operator state as checkpoint entries (docs/sketches/algorithm.md §6): one JSON encoding for it.

Besides the table store, each stateful operator writes its own map (join indexes ``j``, group states
``g``, MIN/MAX buffer values ``v``, top-k buffer ``k``, merge counts ``u``, small scalars ``x``) with
keys that start with the operator's position in the plan. Values keep their exact type: a Decimal, a
Fraction or a float must come back as itself, since a sum that changed type could change a HAVING
decision, so Decimals and Fractions are tagged and plain JSON carries the rest; a non-finite float (a
sum overflowed to ±inf, NaN) is tagged too (``state_bytes``), as JSON would write it null.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ivmstream.sdk import state_bytes, state_loads

# Map names of the operator state (the table store is "t").
JOIN, GROUPS, VALUES, TOPK, MERGE, SCALARS = "j", "g", "v", "k", "u", "x"
NODE_MAPS = (JOIN, GROUPS, VALUES, TOPK, MERGE, SCALARS)


def encode(v: Any) -> Any:
    if isinstance(v, Decimal):
        return {"d": str(v)}
    if isinstance(v, Fraction):
        return {"q": [v.numerator, v.denominator]}
    return v


def decode(v: Any) -> Any:
    if isinstance(v, dict):
        if "d" in v:
            return Decimal(v["d"])
        num, den = v["q"]
        return Fraction(num, den)
    return v


def encode_row(row: Sequence[Any]) -> list[Any]:
    return [encode(v) for v in row]


def decode_row(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(decode(v) for v in values)


def dumps(obj: Any) -> bytes:
    return state_bytes(obj)


def loads(data: bytes) -> Any:
    return state_loads(data)
