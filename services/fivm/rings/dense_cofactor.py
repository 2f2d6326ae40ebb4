"""The cofactor ring with full-width payloads, for strategies that multiply in any order.

docs/fivm/baselines.md §2.3 (the baselines' payloads, and the fivm strategy's with the cofactor ring's
option ``payload: dense``). The block payloads of ``ivmstream.services.fivm.rings.cofactor`` need
every partial product to cover a contiguous range of the view tree's preorder; first-order IVM, the
DBToaster-style hierarchy and the flat join multiply lifts in the order their joins bind variables.
Here every payload spans all m lifted variables: ``(c, s, Q)`` with ``s`` of length m and ``Q`` the full
symmetric m-by-m matrix, so any product order works, at O(m²) per operation, as in a generic ring
payload. Results have the cofactor ring's form (count, variables, sum, sumprod).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ivmstream.services.fivm.rings.cofactor import int_to_bytes

FloatArray = npt.NDArray[np.float64]

_LEN = struct.Struct("<B")
_F8 = np.dtype("<f8")


def _frozen(arr: FloatArray) -> FloatArray:
    arr.flags.writeable = False
    return arr


class Dense:
    """``count`` (exact int), ``sums`` (m floats) and ``quad`` (m-by-m, symmetric); immutable."""

    __slots__ = ("count", "quad", "sums")

    def __init__(self, count: int, sums: FloatArray, quad: FloatArray) -> None:
        self.count = count
        self.sums = _frozen(sums)
        self.quad = _frozen(quad)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dense):
            return NotImplemented
        return (
            self.count == other.count
            and bool(np.array_equal(self.sums, other.sums))
            and bool(np.array_equal(self.quad, other.quad))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Dense(count={self.count}, sums={self.sums.tolist()}, quad={self.quad.tolist()})"


class DenseCofactorRing:
    """Degree-m matrix ring over ``lifted`` (the view tree's preorder, so results name the variables in
    the same order as the fivm strategy's)."""

    name = "dense-cofactor"

    def __init__(self, lifted: Sequence[str]) -> None:
        self.variables: tuple[str, ...] = tuple(lifted)
        self.index = {v: i for i, v in enumerate(self.variables)}
        m = len(self.variables)
        self.m = m
        self._zero = Dense(0, np.zeros(m), np.zeros((m, m)))
        self._one = Dense(1, np.zeros(m), np.zeros((m, m)))
        self._upper = np.triu_indices(m)

    def zero(self) -> Dense:
        return self._zero

    def one(self) -> Dense:
        return self._one

    def add(self, a: Dense, b: Dense) -> Dense:
        return Dense(a.count + b.count, a.sums + b.sums, a.quad + b.quad)

    def mul(self, a: Dense, b: Dense) -> Dense:
        """``(c_a c_b, c_b s_a + c_a s_b, c_b Q_a + c_a Q_b + s_a s_bᵀ + s_b s_aᵀ)``."""
        ca, cb = float(a.count), float(b.count)
        cross = np.outer(a.sums, b.sums)
        quad = cb * a.quad + ca * b.quad + cross + cross.T
        return Dense(a.count * b.count, cb * a.sums + ca * b.sums, quad)

    def neg(self, a: Dense) -> Dense:
        return Dense(-a.count, -a.sums, -a.quad)

    def scale(self, k: int, a: Dense) -> Dense:
        if k == 1:
            return a
        f = float(k)
        return Dense(k * a.count, f * a.sums, f * a.quad)

    def is_zero(self, a: Dense) -> bool:
        """Every component, not only the count (a cancelled count with non-zero sums is not zero)."""
        return a.count == 0 and not a.sums.any() and not a.quad.any()

    def lifts(self, var: str) -> bool:
        return var in self.index

    def lift(self, var: str, value: Any) -> Dense:
        j = self.index.get(var)
        if j is None:
            return self._one
        x = float(value)
        sums = np.zeros(self.m)
        quad = np.zeros((self.m, self.m))
        sums[j] = x
        quad[j, j] = x * x
        return Dense(1, sums, quad)

    def encode(self, a: Dense) -> bytes:
        """Length-prefixed count, the sums, then Q's upper triangle, as little-endian float64."""
        count = int_to_bytes(a.count)
        return b"".join(
            (
                _LEN.pack(len(count)),
                count,
                a.sums.astype(_F8).tobytes(),
                a.quad[self._upper].astype(_F8).tobytes(),
            )
        )

    def decode(self, data: bytes) -> Dense:
        n = data[0]
        count = int.from_bytes(data[1 : 1 + n], "little", signed=True)
        at = 1 + n
        m = self.m
        sums = np.frombuffer(data, dtype=_F8, count=m, offset=at).astype(np.float64)
        upper = np.frombuffer(data, dtype=_F8, count=m * (m + 1) // 2, offset=at + 8 * m)
        quad = np.zeros((m, m))
        quad[self._upper] = upper
        quad.T[self._upper] = upper
        return Dense(count, sums, quad)

    def to_json(self, a: Dense) -> dict[str, Any]:
        return {
            "count": a.count,
            "variables": list(self.variables),
            "sum": a.sums.tolist(),
            "sumprod": a.quad.tolist(),
        }

    def from_aggregates(self, aggregates: dict[tuple[int, ...], Any]) -> Dense:
        """The payload of separately computed aggregates, keyed by monomial: ``()`` the count, ``(i,)``
        Σ x_i, ``(i, j)`` with i <= j Σ x_i·x_j (absent: zero)."""
        m = self.m
        sums = np.zeros(m)
        quad = np.zeros((m, m))
        for mono, value in aggregates.items():
            if len(mono) == 1:
                sums[mono[0]] = float(value)
            elif len(mono) == 2:
                i, j = mono
                quad[i, j] = quad[j, i] = float(value)
        return Dense(int(aggregates.get((), 0)), sums, quad)


def make_dense_cofactor_ring(lifted: Sequence[str], **options: Any) -> DenseCofactorRing:
    """``make_ring("cofactor", lifted, payload="dense")``: floats only, so ``decimals`` is refused."""
    if options.get("decimals") is not None:
        raise ValueError("dense cofactor payloads are floats; decimals needs payload block")
    unknown = set(options) - {"decimals"}
    if unknown:
        raise ValueError(f"the dense cofactor ring takes no options, got {sorted(unknown)}")
    return DenseCofactorRing(lifted)
