"""Comparing a published result with an independent recomputation: exact, except floats.

Integers, strings, booleans and decimals (also decimal strings against numbers) must be equal;
floats agree within a relative and absolute tolerance of 1e-9, since a batch engine sums them in a
different order than the stream.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

FLOAT_TOLERANCE = 1e-9


def _as_decimal(v: Any) -> Decimal | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, Decimal)):
        return Decimal(v)
    if isinstance(v, str):
        try:
            d = Decimal(v)
        except InvalidOperation:
            return None
        return d if d.is_finite() else None
    return None


def diff(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Every difference, as ``path: expected X, published Y`` lines (empty when they agree)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for k in sorted(set(expected) | set(actual), key=str):
            if k not in actual:
                out.append(f"{path}.{k}: missing from the published result")
            elif k not in expected:
                out.append(f"{path}.{k}: published but not expected")
            else:
                out.extend(diff(expected[k], actual[k], f"{path}.{k}"))
        return out
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        if len(expected) != len(actual):
            return [f"{path}: expected {len(expected)} items, published {len(actual)}"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in diff(e, a, f"{path}[{i}]")
        ]
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            e, a = float(expected), float(actual)
        except (TypeError, ValueError):
            return [f"{path}: expected {expected!r}, published {actual!r}"]
        if math.isclose(e, a, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE):
            return []
        return [f"{path}: expected {expected!r}, published {actual!r}"]
    if isinstance(expected, Decimal) or isinstance(actual, Decimal):  # decimals travel as strings in JSON
        de, da = _as_decimal(expected), _as_decimal(actual)
        if de is not None and de == da:
            return []
        return [f"{path}: expected {expected!r}, published {actual!r}"]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{path}: expected {expected!r}, published {actual!r}"]
    return []
