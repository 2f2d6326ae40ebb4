"""Matrix chain multiplication (docs/fivm/rings.md §6).

As a view tree, ``A = A1·A2·A3`` is the query ``Q[I, L] = ⊕_J ⊕_K A1[I,J] ⊗ A2[J,K] ⊗ A3[K,L]``: the
payloads are the matrix entries, a real number per key, and every lift is 1, so the ring is the
field of reals with nothing lifted (``MatrixEntryRing``). The dense functions below are the same
computation on whole numpy matrices, for the baselines that recompute (REEVAL) or propagate an
unfactorized delta (first-order IVM), and for the factorized update path F-IVM takes when a delta is
given as a product ``δA2 = U·Vᵀ`` of rank r. They never modify their arguments unless asked to.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import reduce
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]

_F8 = struct.Struct("<d")


class MatrixEntryRing:
    """(R, +, ·, 0, 1) with every lift 1: payloads are matrix entries (§6.1)."""

    name = "matrix"

    def __init__(self, lifted: Sequence[str] = ()) -> None:
        if lifted:
            raise ValueError(f"matrix-chain payloads lift no variable, got {list(lifted)}")

    def zero(self) -> float:
        return 0.0

    def one(self) -> float:
        return 1.0

    def add(self, a: float, b: float) -> float:
        return a + b

    def mul(self, a: float, b: float) -> float:
        return a * b

    def neg(self, a: float) -> float:
        return -a

    def scale(self, k: int, a: float) -> float:
        return k * a

    def is_zero(self, a: float) -> bool:
        return a == 0.0

    def lifts(self, var: str) -> bool:
        return False

    def lift(self, var: str, value: Any) -> float:
        return 1.0

    def encode(self, a: float) -> bytes:
        return _F8.pack(a)

    def decode(self, data: bytes) -> float:
        (value,) = _F8.unpack(data)
        return float(value)

    def to_json(self, a: float) -> float:
        return a


def make_matrix_ring(lifted: Sequence[str], **options: Any) -> MatrixEntryRing:
    """Registry factory: ``"matrix": make_matrix_ring``."""
    if options:
        raise ValueError(f"the matrix ring takes no options, got {sorted(options)}")
    return MatrixEntryRing(lifted)


def chain_product(matrices: Sequence[Matrix]) -> Matrix:
    """``A1·A2·…·Ak`` left to right: the REEVAL baseline recomputes this after every update (§6.2)."""
    if not matrices:
        raise ValueError("a matrix chain needs at least one matrix")
    return reduce(np.matmul, matrices)


def first_order_delta(left: Matrix, delta: Matrix, right: Matrix) -> Matrix:
    """``δA = left·δA_i·right`` with δA_i as a full matrix: first-order IVM's two matrix products.

    Evaluated left to right without exploiting any factorization of δA_i (§6.2).
    """
    return (left @ delta) @ right


def as_columns(vectors: npt.ArrayLike) -> Matrix:
    """A vector as an n-by-1 matrix, a matrix unchanged: rank-1 and rank-r updates share one code path."""
    arr = np.asarray(vectors, dtype=np.float64)
    return arr[:, None] if arr.ndim == 1 else arr


def factorized_delta(
    left: Matrix, u: npt.ArrayLike, v: npt.ArrayLike, right: Matrix
) -> tuple[Matrix, Matrix]:
    """For ``δA_i = U·Vᵀ`` (U is n-by-r, V is m-by-r; vectors for rank 1), the factors of
    ``δA = (left·U)·(Vᵀ·right)``: F-IVM pushes the sums past the product (§6.3).

    Costs O(r·n²) instead of a matrix-matrix product; the caller adds ``outer`` of the factors.
    """
    uu, vv = as_columns(u), as_columns(v)
    if uu.shape[1] != vv.shape[1]:
        raise ValueError(f"U has {uu.shape[1]} columns but V has {vv.shape[1]}")
    return left @ uu, right.T @ vv


def expand(u: npt.ArrayLike, v: npt.ArrayLike) -> Matrix:
    """``U·Vᵀ`` as a dense matrix (the delta a non-factorized strategy receives)."""
    return as_columns(u) @ as_columns(v).T


def add_low_rank(a: Matrix, u: npt.ArrayLike, v: npt.ArrayLike, *, inplace: bool = False) -> Matrix:
    """``A + U·Vᵀ``, into ``a`` itself when ``inplace`` (the stored result view, §6.3)."""
    update = expand(u, v)
    if inplace:
        a += update
        return a
    return a + update


def row_update(n: int, row: int, values: npt.ArrayLike) -> tuple[Matrix, Matrix]:
    """A change of one row, ``δA_i = e_row ⊗ values``, as rank-1 factors."""
    e = np.zeros(n, dtype=np.float64)
    e[row] = 1.0
    return as_columns(e), as_columns(values)
