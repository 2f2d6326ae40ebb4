"""The row loops of column execution (services/fivm/columnar.py): the block product of two columns of
cofactor payloads, the lifts of a leaf's tuples, and the moves between payload objects and columns.

Each is written here with numpy, the reference, and compiled in ``_kernels.c`` (built by setup.py where
a C compiler is present). The numpy forms build concatenations and gathers of whole columns; the
compiled loops write each output element once, in place. The module exports the compiled functions
when they are built and ``IVMSTREAM_PURE_PYTHON`` is not ``1``, else the numpy ones. Both compute each
element as the same IEEE product, so their results are equal bit for bit
(tests/unit/fivm/test_fivm_kernels.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

# Set to 1 to run the numpy forms even where the compiled loops are built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"


@lru_cache(maxsize=256)
def _triu(k: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    return np.triu_indices(k)  # type: ignore[return-value]


@lru_cache(maxsize=4096)
def product_layout(ka: int, kb: int) -> npt.NDArray[np.intp]:
    """Gather indexes assembling the product's upper triangle from ``[Q_a | s_a s_bᵀ | Q_b]``.

    Row i < ka of the result is row i of Q_a followed by row i of the cross block; rows i >= ka are
    the rows of Q_b. Only block widths matter, so the layout is computed once per (ka, kb).
    """
    k = ka + kb
    rows, cols = _triu(k)
    cross_at = ka * (ka + 1) // 2
    qb_at = cross_at + ka * kb
    out = np.empty(len(rows), dtype=np.intp)
    in_a = cols < ka
    in_b = rows >= ka
    cross = ~in_a & ~in_b
    ra, ca = rows[in_a], cols[in_a]
    out[in_a] = ra * ka - ra * (ra - 1) // 2 + (ca - ra)
    out[cross] = cross_at + rows[cross] * kb + (cols[cross] - ka)
    rb, cb = rows[in_b] - ka, cols[in_b] - ka
    out[in_b] = qb_at + rb * kb - rb * (rb - 1) // 2 + (cb - rb)
    out.flags.writeable = False
    return out


def py_mul_rows_into(
    ac: Ints, a_sums: Floats, a_quad: Floats, bc: Ints, b_sums: Floats, b_quad: Floats,
    counts: Ints, sums: Floats, quad: Floats,
) -> None:  # fmt: skip
    """Row i of the outputs is ``a[i]·b[i]``, block a first: counts ``ca·cb``, sums ``(cb·s_a | ca·s_b)``,
    quad the upper triangle of ``[[cb·Q_a, s_a s_bᵀ], [., ca·Q_b]]`` (docs/fivm/rings.md §2.3)."""
    n, ka = a_sums.shape
    kb = b_sums.shape[1]
    ca, cb = ac.astype(np.float64)[:, None], bc.astype(np.float64)[:, None]
    counts[:] = ac * bc
    sums[:, :ka] = cb * a_sums
    sums[:, ka:] = ca * b_sums
    cross = (a_sums[:, :, None] * b_sums[:, None, :]).reshape(n, ka * kb)
    parts = np.concatenate((cb * a_quad, cross, ca * b_quad), axis=1)
    quad[:] = parts[:, product_layout(ka, kb)]


def py_lift_into(x: Floats, mults: Ints, sums: Floats, quad: Floats) -> None:
    """Row i: ``sums = m_i·x_i`` and ``quad = m_i·(x_i x_iᵀ)``'s upper triangle, as ``m·(x_r·x_c)``."""
    rows, cols = _triu(x.shape[1])
    m = mults.astype(np.float64)[:, None]
    sums[:] = m * x
    quad[:] = m * (x[:, rows] * x[:, cols])


def py_gather_into(payloads: Sequence[Any], lo: int, counts: Ints, sums: Floats, quad: Floats) -> bool:
    """The count, sums and upper triangle of each payload into row i of the columns; False when a
    payload's block is not ``[lo, lo + k)`` with k the columns' width."""
    n, k = sums.shape
    if any(len(p.sums) != k or (k and p.lo != lo) for p in payloads):
        return False
    counts[:] = [p.count for p in payloads]
    if n:
        sums[:] = np.array([p.sums for p in payloads]).reshape(n, k)
        quad[:] = np.array([p.quad for p in payloads]).reshape(n, quad.shape[1])
    return True


def py_payload_rows(
    cls: Any, keys: list[Any], lo: int, counts: list[int], sums: Floats, quad: Floats
) -> list[tuple[Any, Any]]:
    """``(keys[i], p_i)``: p_i a new ``cls`` made without ``__init__``, its lo, count and the columns'
    rows i as its sums and quad."""
    out = []
    for key, count, s, q in zip(keys, counts, sums, quad, strict=True):
        p = cls.__new__(cls)
        p.lo, p.count, p.sums, p.quad = lo, count, s, q
        out.append((key, p))
    return out


def _load() -> ModuleType | None:
    try:
        from ivmstream.services.fivm import _kernels
    except ImportError:
        return None
    return _kernels


compiled = _load()
ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV) != "1" else "python"

mul_rows_into: Callable[..., Any] = py_mul_rows_into
lift_into: Callable[..., Any] = py_lift_into
gather_into: Callable[..., bool] = py_gather_into
payload_rows: Callable[..., list[tuple[Any, Any]]] = py_payload_rows
if ACTIVE == "compiled":
    assert compiled is not None
    mul_rows_into = compiled.mul_rows_into
    lift_into = compiled.lift_into
    gather_into = compiled.gather_into
    payload_rows = compiled.payload_rows
