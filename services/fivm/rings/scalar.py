"""COUNT and SUM payloads: the ring of integers (exact) or of reals (floats), docs/fivm/algorithm.md §2.8.

COUNT lifts nothing: every variable's lift is 1, so the root payload is the number of join tuples
(with multiplicity). SUM over a product of variables lifts each summed variable by the identity (or a
power when a variable is summed more than once, ``SUM(x·x)``) and every other variable by 1. Integer
payloads are Python ints, so they never overflow; real payloads are floats, or, in the ``decimal``
domain, exact ints counting 10^-N units per lifted factor (docs/fivm/rings.md §8).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.services.fivm.rings.decimals import check_decimals, from_units, to_units

_F8 = struct.Struct("<d")
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

DOMAINS = ("int", "float", "decimal")


class ScalarRing:
    """(Z or R, +, ·, 0, 1) with identity (or power) lifts on ``lifted`` and lift 1 elsewhere.

    Domain ``decimal``: payloads are ints; a lift is ``to_units(x, decimals)`` to its power, so a full
    product (a root payload) counts units of 10^-(decimals · Σ powers), the scale ``to_json`` divides by.
    """

    def __init__(
        self,
        name: str,
        lifted: Sequence[str],
        powers: Mapping[str, int],
        domain: str,
        decimals: int | None = None,
    ) -> None:
        if domain not in DOMAINS:
            raise ValueError(f"scalar ring domain must be one of {', '.join(DOMAINS)}, got {domain!r}")
        if len(set(lifted)) != len(lifted):
            raise ValueError(f"lifted variables must be distinct: {list(lifted)}")
        unknown = set(powers) - set(lifted)
        if unknown:
            raise ValueError(f"powers given for variables that are not lifted: {sorted(unknown)}")
        self.name = name
        self.domain = domain
        self.exact = domain != "float"
        self.decimals: int | None = None
        if domain == "decimal":
            if decimals is None:
                raise ValueError("the decimal domain needs decimals (the number of decimal places)")
            self.decimals = check_decimals(decimals)
        self.variables: tuple[str, ...] = tuple(lifted)
        self.powers: dict[str, int] = {v: int(powers.get(v, 1)) for v in lifted}
        for v, k in self.powers.items():
            if k < 1:
                raise ValueError(f"the power of {v!r} must be a positive integer, got {k}")
        self.exponent = 0 if self.decimals is None else self.decimals * sum(self.powers.values())
        self._zero: int | float = 0 if self.exact else 0.0
        self._one: int | float = 1 if self.exact else 1.0

    def zero(self) -> int | float:
        return self._zero

    def one(self) -> int | float:
        return self._one

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def neg(self, a: Any) -> Any:
        return -a

    def scale(self, k: int, a: Any) -> Any:
        return k * a

    def is_zero(self, a: Any) -> bool:
        return a == 0

    def lifts(self, var: str) -> bool:
        return var in self.powers

    def lift(self, var: str, value: Any) -> Any:
        k = self.powers.get(var)
        if k is None:
            return self._one
        x: Any = value if self.exact else float(value)
        if self.decimals is not None:
            x = to_units(value, self.decimals)
        return x if k == 1 else x**k

    def leaf_delta(
        self,
        variables: Sequence[str],
        positions: Sequence[int],
        key_pos: Sequence[int],
        delta: Mapping[tuple[Any, ...], int],
    ) -> dict[tuple[Any, ...], Any]:
        """A leaf's δ for a whole relation delta, per key ``Σ m · Π lifts`` in the per-tuple trigger's
        order of operations (so the same floats), without a ring call per tuple (fivm.md §2.14)."""
        one = self._one
        lifted = list(zip(variables, positions, strict=True))
        single = len(key_pos) == 1
        k0 = key_pos[0] if key_pos else 0
        out: dict[tuple[Any, ...], Any] = {}
        for t, m in delta.items():
            p = one
            for v, i in lifted:
                p = p * self.lift(v, t[i])
            p = m * p
            key = (t[k0],) if single else tuple([t[i] for i in key_pos])
            prev = out.get(key)
            out[key] = p if prev is None else prev + p
        return {k: p for k, p in out.items() if p != 0}

    def encode(self, a: Any) -> bytes:
        """Floats: 8 bytes IEEE; ints: minimal little-endian two's complement (any size)."""
        if self.exact:
            return int(a).to_bytes((int(a).bit_length() + 8) // 8, "little", signed=True)
        return _F8.pack(a)

    def decode(self, data: bytes) -> Any:
        if self.exact:
            return int.from_bytes(data, "little", signed=True)
        if len(data) != _F8.size:
            raise ValueError(f"a real payload is 8 bytes, got {len(data)}")
        return _F8.unpack(data)[0]

    def to_json(self, a: Any) -> int | float | str:
        """Ints outside int64 become exact decimal strings (a JSON reader would otherwise round them);
        decimal payloads (root payloads: every lift multiplied in) become the nearest float."""
        if self.decimals is not None:
            return from_units(a, self.exponent)
        if self.exact:
            return a if INT64_MIN <= a <= INT64_MAX else str(a)
        return float(a)


def make_count_ring(lifted: Sequence[str], **options: Any) -> ScalarRing:
    """Registry factory for ``count``: lifts nothing, exact integers."""
    if lifted:
        raise ValueError(f"the count ring lifts no variable, got {list(lifted)}")
    if options:
        raise ValueError(f"the count ring takes no options, got {sorted(options)}")
    return ScalarRing("count", (), {}, "int")


def make_sum_ring(lifted: Sequence[str], **options: Any) -> ScalarRing:
    """Registry factory for ``sum``: SUM of the product of ``lifted`` (each to its power, option
    ``powers``, default 1) over Z (option ``domain="int"``: every summed variable is an integer) or R
    (``"float"``, the default). Option ``decimals`` (an int N, or None) turns the float domain into
    exact decimals with N places; the int domain is exact already and ignores it."""
    if not lifted:
        raise ValueError("the sum ring needs at least one summed variable (use count otherwise)")
    unknown = set(options) - {"domain", "powers", "decimals"}
    if unknown:
        raise ValueError(f"the sum ring takes options domain, powers and decimals, got {sorted(unknown)}")
    domain = options.get("domain", "float")
    decimals = options.get("decimals")
    if decimals is not None and domain == "float":
        domain = "decimal"
    if domain != "decimal":
        decimals = None
    return ScalarRing("sum", lifted, options.get("powers") or {}, domain, decimals)
