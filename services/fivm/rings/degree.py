"""The degree-indexed encoding of the cofactor aggregates, as a ring (docs/fivm/rings.md §3).

This is the payload of the SQL-OPT baseline: instead of a dense block ``(c, s, Q)``, each aggregate is
one entry keyed by its *monomial*, the product of lifted variables it sums. A monomial is the sorted
tuple of its variables' preorder indexes: ``()`` is the count, ``(i,)`` the sum of x_i and ``(i, j)``
with i <= j the sum of x_i·x_j. It is the sparse form of a degree vector (index i listed d times means
degree d). Multiplication multiplies monomials and drops those of total degree above 2, so the ring
is the polynomial ring truncated at degree 2 and computes the same aggregates as the cofactor ring.

Payloads are canonical dicts: entries whose value is zero are dropped, so equal payloads are equal
dicts and the zero payload is ``{}``. The count entry stays an exact int. With ``decimals = N``
(docs/fivm/rings.md §8) every entry is an exact int: a monomial of degree d counts units of
10^-(N·d), so the ring computes exactly what the exact cofactor ring computes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ivmstream.services.fivm.rings.cofactor import int_to_bytes
from ivmstream.services.fivm.rings.decimals import check_decimals, from_units, to_units

Monomial = tuple[int, ...]
DegreeMap = dict[Monomial, float]

MAX_DEGREE = 2

_ONE: DegreeMap = {(): 1}


def _merge(a: Monomial, b: Monomial) -> Monomial:
    return tuple(sorted(a + b))


def _canonical(entries: DegreeMap) -> DegreeMap:
    return {key: value for key, value in entries.items() if value != 0}


# One entry: a tag byte (degree in bits 0-1, bit 2 set for an exact int), the indexes as u32, then the
# value: an int as a length byte and signed little-endian bytes, a float as little-endian float64.
_TAG = struct.Struct("<B")
_INDEX = struct.Struct("<I")
_FLOAT = struct.Struct("<d")
_INT_FLAG = 4


class DegreeRing:
    """Truncated polynomial ring over the lifted variables (view-tree preorder), §3; exact over ints
    counting decimal units when ``decimals`` is given (§8)."""

    name = "degree"

    def __init__(self, lifted: Sequence[str], decimals: int | None = None) -> None:
        if len(set(lifted)) != len(lifted):
            raise ValueError(f"lifted variables must be distinct: {list(lifted)}")
        self.decimals = None if decimals is None else check_decimals(decimals)
        self.variables: tuple[str, ...] = tuple(lifted)
        self.index: dict[str, int] = {v: i for i, v in enumerate(self.variables)}

    def zero(self) -> DegreeMap:
        return {}

    def one(self) -> DegreeMap:
        return dict(_ONE)

    def add(self, a: DegreeMap, b: DegreeMap) -> DegreeMap:
        out = dict(a)
        for key, value in b.items():
            total = out.get(key, 0) + value
            if total != 0:
                out[key] = total
            else:
                out.pop(key, None)
        return out

    def mul(self, a: DegreeMap, b: DegreeMap) -> DegreeMap:
        """Pairs monomials of total degree <= 2 (the join on compatible degree columns, §3)."""
        out: DegreeMap = {}
        for ka, va in a.items():
            room = MAX_DEGREE - len(ka)
            for kb, vb in b.items():
                if len(kb) <= room:
                    key = _merge(ka, kb)
                    out[key] = out.get(key, 0) + va * vb
        return _canonical(out)

    def neg(self, a: DegreeMap) -> DegreeMap:
        return {key: -value for key, value in a.items()}

    def scale(self, k: int, a: DegreeMap) -> DegreeMap:
        return _canonical({key: k * value for key, value in a.items()}) if k else {}

    def is_zero(self, a: DegreeMap) -> bool:
        """Every aggregate, not only the count, must be zero (§1.3)."""
        return all(value == 0 for value in a.values())

    def lifts(self, var: str) -> bool:
        return var in self.index

    def lift(self, var: str, value: Any) -> DegreeMap:
        """``1 + x·X_j + x²·X_j²``: the count, the sum and the square of one value."""
        j = self.index.get(var)
        if j is None:
            return self.one()
        x = float(value) if self.decimals is None else to_units(value, self.decimals)
        return _canonical({(): 1, (j,): x, (j, j): x * x})

    def lift_block(self, variables: Sequence[str], values: Sequence[Any]) -> DegreeMap:
        """The product of the lifts of several variables (a leaf's private variables, §2.3)."""
        out = self.one()
        for var, value in zip(variables, values, strict=True):
            out = self.mul(out, self.lift(var, value))
        return out

    def encode(self, a: DegreeMap) -> bytes:
        parts: list[bytes] = []
        for key in sorted(a):
            value = a[key]
            exact = isinstance(value, int)
            parts.append(_TAG.pack(len(key) | (_INT_FLAG if exact else 0)))
            parts.extend(_INDEX.pack(i) for i in key)
            if exact:
                raw = int_to_bytes(int(value))
                parts.append(_TAG.pack(len(raw)) + raw)
            else:
                parts.append(_FLOAT.pack(value))
        return b"".join(parts)

    def decode(self, data: bytes) -> DegreeMap:
        out: DegreeMap = {}
        at = 0
        while at < len(data):
            (tag,) = _TAG.unpack_from(data, at)
            at += 1
            degree = tag & 3
            key = tuple(_INDEX.unpack_from(data, at + 4 * i)[0] for i in range(degree))
            at += 4 * degree
            if tag & _INT_FLAG:
                n = data[at]
                out[key] = int.from_bytes(data[at + 1 : at + 1 + n], "little", signed=True)
                at += 1 + n
            else:
                (out[key],) = _FLOAT.unpack_from(data, at)
                at += 8
        return out

    def to_json(self, a: DegreeMap) -> dict[str, Any]:
        """The cofactor ring's result form: count, sums and the symmetric ``sumprod`` matrix (§2.6)."""
        e = self.decimals
        m = len(self.variables)
        sums = [0.0] * m
        prods = [[0.0] * m for _ in range(m)]
        for key, value in a.items():
            if len(key) == 1:
                sums[key[0]] = float(value) if e is None else from_units(int(value), e)
            elif len(key) == 2:
                i, j = key
                prods[i][j] = prods[j][i] = float(value) if e is None else from_units(int(value), 2 * e)
        return {"count": a.get((), 0), "variables": list(self.variables), "sum": sums, "sumprod": prods}


def make_degree_ring(lifted: Sequence[str], **options: Any) -> DegreeRing:
    """Registry factory: ``"degree": make_degree_ring``; option ``decimals`` makes it exact (§8)."""
    unknown = set(options) - {"decimals"}
    if unknown:
        raise ValueError(f"the degree ring takes the option decimals only, got {sorted(unknown)}")
    return DegreeRing(lifted, options.get("decimals"))
