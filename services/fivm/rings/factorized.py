"""Factorized payloads: a query result distributed over the views (docs/fivm/rings.md §5).

At the view of an output variable X each payload is a relation over ``{X}`` alone: every X-value
with its multiplicity (the number of join derivations below it), plus the cached total ``count``.
Payloads of views without an output variable of their own (relations, bound variables) are plain
ints. A product keeps the factor of the variable highest in the variable order (the smallest
preorder index: the view's own X) and scales it by the counts of the other factors; the others'
values are not lost, they stay in the child views the enumeration visits (§5.3). Sum merges the
maps. Both are associative and distribute because a count is additive.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from ivmstream.services.fivm.rings.cofactor import BlockLayoutError
from ivmstream.services.fivm.rings.listing import sorted_rows


class Factor:
    """The payload at an output variable's view: ``values`` (value -> multiplicity) and their sum."""

    __slots__ = ("count", "values", "var")

    def __init__(self, var: int, values: dict[Any, int], count: int) -> None:
        self.var = var
        self.values = values
        self.count = count

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.count == other and not any(self.values.values())
        if not isinstance(other, Factor):
            return NotImplemented
        mine = {x: m for x, m in self.values.items() if m}
        theirs = {x: m for x, m in other.values.items() if m}
        return self.count == other.count and mine == theirs and (not mine or self.var == other.var)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Factor(var={self.var}, values={self.values}, count={self.count})"


FactPayload = int | Factor


def count(a: FactPayload) -> int:
    """The number of derivations a payload stands for (an int payload is its own count)."""
    return a.count if isinstance(a, Factor) else a


def values(a: FactPayload) -> Iterator[tuple[Any, int]]:
    """The (value, multiplicity) pairs of an output variable's payload, non-zero ones only (§5.3)."""
    if isinstance(a, Factor):
        yield from ((x, m) for x, m in a.values.items() if m)


def _factor(var: int, vals: dict[Any, int], total: int) -> FactPayload:
    """A Factor, or 0 when no value is left: zero has one representation, whatever its variable."""
    return Factor(var, vals, total) if vals else 0


class FactorizedRing:
    """Factorized payloads over the output variables ``lifted`` (view-tree preorder), §5."""

    name = "factorized"

    def __init__(self, lifted: Sequence[str]) -> None:
        if len(set(lifted)) != len(lifted):
            raise ValueError(f"lifted variables must be distinct: {list(lifted)}")
        self.variables: tuple[str, ...] = tuple(lifted)
        self.index: dict[str, int] = {v: i for i, v in enumerate(self.variables)}

    def zero(self) -> FactPayload:
        return 0

    def one(self) -> FactPayload:
        return 1

    def add(self, a: FactPayload, b: FactPayload) -> FactPayload:
        """Merge the value maps (values reaching zero vanish); both sides must be over one variable."""
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(b, int) or isinstance(a, int):
            factor, scalar = (a, b) if isinstance(a, Factor) else (b, a)
            assert isinstance(factor, Factor)
            if scalar:
                raise BlockLayoutError(f"adding a count to values of variable {factor.var}")
            return factor
        if a.var != b.var:
            raise BlockLayoutError(f"adding values of variables {a.var} and {b.var}")
        vals = dict(a.values)
        for x, m in b.values.items():
            total = vals.get(x, 0) + m
            if total:
                vals[x] = total
            else:
                vals.pop(x, None)
        return _factor(a.var, vals, a.count + b.count)

    def sum_all(self, payloads: Sequence[FactPayload]) -> FactPayload:
        """The sum of ``payloads`` merged into one fresh map: a view's key met by many join rows of a
        batch costs one pass over their values instead of a copy per row (docs/fivm/algorithm.md §2.14)."""
        if len(payloads) == 1:
            return payloads[0]
        factors = [p for p in payloads if isinstance(p, Factor)]
        if not factors:
            return sum(payloads)  # type: ignore[arg-type]
        if len(factors) < len(payloads):
            return functools.reduce(self.add, payloads)  # the mixed case, and its errors
        var = factors[0].var
        vals: dict[Any, int] = {}
        total = 0
        for f in factors:
            if f.var != var:
                raise BlockLayoutError(f"adding values of variables {var} and {f.var}")
            total += f.count
            for x, m in f.values.items():
                vals[x] = vals.get(x, 0) + m
        return _factor(var, {x: m for x, m in vals.items() if m}, total)

    def mul(self, a: FactPayload, b: FactPayload) -> FactPayload:
        """Keep the factor of the variable highest in the order, scaled by the other's count (§5.2)."""
        if isinstance(a, Factor) and isinstance(b, Factor):
            if a.var == b.var:
                raise BlockLayoutError(f"multiplying two payloads of variable {a.var} (lifted twice)")
            keep, other = (a, b) if a.var < b.var else (b, a)
            return self.scale(other.count, keep)
        if isinstance(a, Factor):
            return self.scale(count(b), a)
        return self.scale(a, b)

    def neg(self, a: FactPayload) -> FactPayload:
        return self.scale(-1, a)

    def scale(self, k: int, a: FactPayload) -> FactPayload:
        if isinstance(a, int):
            return k * a
        if k == 1:
            return a
        if not k:
            return 0
        return _factor(a.var, {x: k * m for x, m in a.values.items()}, k * a.count)

    def is_zero(self, a: FactPayload) -> bool:
        if isinstance(a, Factor):
            return a.count == 0 and not any(a.values.values())
        return a == 0

    def lifts(self, var: str) -> bool:
        return var in self.index

    def lift(self, var: str, value: Any) -> FactPayload:
        """``{x -> 1}`` over an output variable, ``1`` for any other variable."""
        j = self.index.get(var)
        return 1 if j is None else Factor(j, {value: 1}, 1)

    def lift_block(self, variables: Sequence[str], values: Sequence[Any]) -> FactPayload:
        """The product of the lifts of ``variables`` in one step: the product keeps the factor of the
        lowest index (§5.2), so it is that variable's lift (a leaf's composed variables, §5.2)."""
        best = -1
        at = 0
        for i, v in enumerate(variables):
            j = self.index.get(v)
            if j is not None and (best < 0 or j < best):
                best, at = j, i
        return 1 if best < 0 else Factor(best, {values[at]: 1}, 1)

    def lift_sum(self, var: str, weights: Mapping[Any, int]) -> FactPayload:
        """``Σ_x weights[x] · lift(var, x)`` in one payload (a trigger step over int counts, §5.2)."""
        total = sum(weights.values())
        j = self.index.get(var)
        if j is None:
            return total
        vals = {x: m for x, m in weights.items() if m} if 0 in weights.values() else dict(weights)  # owned
        return _factor(j, vals, total)

    def leaf_delta(
        self,
        variables: Sequence[str],
        positions: Sequence[int],
        key_pos: Sequence[int],
        delta: Mapping[tuple[Any, ...], int],
    ) -> dict[tuple[Any, ...], FactPayload]:
        """A leaf's δ for a whole relation delta: per key, ``Σ m · lift_block(variables, t)`` without a
        payload per tuple: the multiplicities of the kept variable's values are counted per key in
        plain maps and wrapped once (docs/fivm/algorithm.md §2.14)."""
        best = -1
        at = 0
        for v, i in zip(variables, positions, strict=True):
            j = self.index.get(v)
            if j is not None and (best < 0 or j < best):
                best, at = j, i
        one = len(key_pos) == 1
        k0 = key_pos[0] if key_pos else 0
        if best < 0:  # a count per key
            counts: dict[tuple[Any, ...], int] = {}
            for t, m in delta.items():
                key = (t[k0],) if one else tuple([t[i] for i in key_pos])
                counts[key] = counts.get(key, 0) + m
            return {key: c for key, c in counts.items() if c}  # type: ignore[misc]
        acc: dict[tuple[Any, ...], dict[Any, int]] = {}
        for t, m in delta.items():
            key = (t[k0],) if one else tuple([t[i] for i in key_pos])
            x = t[at]
            vals = acc.get(key)
            if vals is None:
                acc[key] = {x: m}
            else:
                vals[x] = vals.get(x, 0) + m
        out: dict[tuple[Any, ...], FactPayload] = {}
        for key, vals in acc.items():
            live = {x: m for x, m in vals.items() if m} if 0 in vals.values() else vals
            if live:
                out[key] = Factor(best, live, sum(live.values()))
        return out

    # An int payload is a msgpack int; a Factor is ``[var, [[value, multiplicity], ...], count]``.
    # Values are scalars msgpack keeps exactly; multiplicities and counts fit in 64 bits (§5.4).
    def encode(self, a: FactPayload) -> bytes:
        if isinstance(a, Factor):
            return msgspec.msgpack.encode([a.var, list(a.values.items()), a.count])
        return msgspec.msgpack.encode(a)

    def decode(self, data: bytes) -> FactPayload:
        raw = msgspec.msgpack.decode(data)
        if isinstance(raw, int):
            return raw
        var, pairs, total = raw
        return Factor(var, {x: m for x, m in pairs}, total)

    def to_json(self, a: FactPayload) -> dict[str, Any]:
        """The count; for an output variable's payload also its values with their multiplicities."""
        if not isinstance(a, Factor):
            return {"count": a}
        pairs = sorted_rows(((x,), m) for x, m in a.values.items() if m)
        return {"count": a.count, "variable": self.variables[a.var], "values": [[t[0], m] for t, m in pairs]}


def make_factorized_ring(lifted: Sequence[str], **options: Any) -> FactorizedRing:
    """Registry factory: ``"factorized": make_factorized_ring``."""
    if options:
        raise ValueError(f"the factorized ring takes no options, got {sorted(options)}")
    return FactorizedRing(lifted)
