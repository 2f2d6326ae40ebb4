"""The degree-m cofactor (covariance) ring with block payloads (docs/fivm/rings.md §2).

A payload ``(c, s, Q)`` aggregates a bag of tuples: ``c`` is the (signed) number of tuples, ``s`` the
sum of each lifted variable, ``Q`` the sum of each product of two lifted variables. The root payload
of a view tree holds the Gram matrix of the whole join, from which every least-squares model over any
label and feature subset follows (``ivmstream.services.fivm.model``).

Lifted variables are numbered in view-tree preorder, so the variables lifted below any view form one
contiguous index range: a payload stores only its *block* ``[lo, lo+k)`` (§2.2), ``Q`` only as its
upper triangle. Payloads are immutable (their arrays are read-only) so ring operations may share them.

With ``decimals = N`` (§8) the ring is exact: sums and products are numpy *object* arrays of Python
ints (the same vectorised code adds, multiplies and gathers them), ``s`` counting 10^-N units and
``Q`` 10^-2N units, so payloads do not depend on the order of additions and cancel to exact zeros.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ivmstream.services.fivm import kernels
from ivmstream.services.fivm.kernels import RANK_ONE, product_layout, rank_one
from ivmstream.services.fivm.rings.decimals import check_decimals, from_units, to_units

FloatArray = npt.NDArray[np.float64]

_EMPTY = np.zeros(0, dtype=np.float64)
_EMPTY.flags.writeable = False


class BlockLayoutError(RuntimeError):
    """Payloads whose blocks cannot be combined: an engine bug, never a data error (§2.3)."""


def _frozen(values: Any) -> FloatArray:
    """A read-only float64 array, or the same object array of exact ints (§8)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        arr = values
    else:
        arr = np.asarray(values, dtype=np.float64)
    if arr.flags.writeable:
        arr.flags.writeable = False
    return arr


def tri_size(k: int) -> int:
    """Entries of a k-by-k upper triangle including the diagonal."""
    return k * (k + 1) // 2


def exact_array(values: Sequence[int]) -> FloatArray:
    """A read-only object array of Python ints (an exact payload component, §8)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    arr.flags.writeable = False
    return arr


@lru_cache(maxsize=256)
def triu(k: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Row and column indexes of a k-by-k upper triangle, row-major (computed once per k)."""
    rows, cols = np.triu_indices(k)
    rows.flags.writeable = False
    cols.flags.writeable = False
    return rows, cols


def upper(dense: npt.ArrayLike) -> FloatArray:
    """The upper triangle (row-major, diagonal included) of a square matrix (object arrays stay exact)."""
    mat = np.asarray(dense)
    if mat.dtype != object:
        mat = mat.astype(np.float64)
    return _frozen(mat[triu(mat.shape[0])])


def symmetric(quad: FloatArray, k: int) -> FloatArray:
    """The full symmetric k-by-k matrix of an upper triangle, of the triangle's dtype."""
    full = np.zeros((k, k), dtype=quad.dtype)
    rows, cols = triu(k)
    full[rows, cols] = quad
    full[cols, rows] = quad
    return full


class Cofactor:
    """One block payload ``(count, sums, quad)`` over lifted variables ``[lo, lo + k)`` (§2.2).

    ``count`` is an exact int; ``sums`` has k floats; ``quad`` is Q's upper triangle, k(k+1)/2 floats
    (or, in an exact ring, object arrays of ints: §8).
    An empty block (k = 0) is a scalar ``count · 1``; its ``lo`` is 0 and carries no meaning.
    Equality is ring equality: entries outside a block are zero, so blocks of different placement can
    still be equal when their sums and products are all zero.
    """

    __slots__ = ("count", "lo", "quad", "sums")

    def __init__(self, lo: int, count: int, sums: Any = _EMPTY, quad: Any = _EMPTY) -> None:
        self.sums = _frozen(sums)
        self.quad = _frozen(quad)
        k = len(self.sums)
        if self.sums.ndim != 1 or self.quad.shape != (tri_size(k),):
            raise BlockLayoutError(f"block of {k} sums needs {tri_size(k)} products, got {self.quad.shape}")
        self.lo = lo if k else 0
        self.count = int(count)

    @property
    def k(self) -> int:
        return len(self.sums)

    @property
    def hi(self) -> int:
        return self.lo + self.k

    def dense(self, lo: int, hi: int) -> tuple[FloatArray, FloatArray]:
        """``s`` and the full symmetric ``Q`` over the index range [lo, hi), zeros outside the block."""
        if self.k and (self.lo < lo or self.hi > hi):
            raise BlockLayoutError(f"block [{self.lo}, {self.hi}) outside [{lo}, {hi})")
        s = np.zeros(hi - lo, dtype=self.sums.dtype)
        q = np.zeros((hi - lo, hi - lo), dtype=self.sums.dtype)
        at = self.lo - lo
        s[at : at + self.k] = self.sums
        q[at : at + self.k, at : at + self.k] = symmetric(self.quad, self.k)
        return s, q

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cofactor):
            return NotImplemented
        if self.count != other.count:
            return False
        if self.lo == other.lo and self.k == other.k:
            return bool(np.array_equal(self.sums, other.sums) and np.array_equal(self.quad, other.quad))
        blocks = [p for p in (self, other) if p.k]
        lo, hi = min(p.lo for p in blocks), max(p.hi for p in blocks)
        (s1, q1), (s2, q2) = self.dense(lo, hi), other.dense(lo, hi)
        return bool(np.array_equal(s1, s2) and np.array_equal(q1, q2))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        sums, quad = self.sums.tolist(), self.quad.tolist()
        return f"Cofactor(lo={self.lo}, count={self.count}, sums={sums}, quad={quad})"


class RowCofactor(Cofactor):
    """The payload in row ``row`` of a batch's read-only columns ``block`` (a ``CofactorRows``).

    Column execution stores one payload per key a batch adds to a view; this form keeps the batch's
    columns and the row number instead of two array views per payload, so making it costs no numpy
    call. ``sums`` and ``quad`` are the row's views, made when read; the compiled gather copies the row
    straight from the columns. It equals, pickles and copies as the plain ``Cofactor`` it stands for.
    """

    __slots__ = ("block", "row")

    block: CofactorRows
    row: int

    @property
    def sums(self) -> FloatArray:  # type: ignore[override]
        return self.block.sums[self.row]  # type: ignore[no-any-return]

    @property
    def quad(self) -> FloatArray:  # type: ignore[override]
        return self.block.quad[self.row]  # type: ignore[no-any-return]

    @property
    def k(self) -> int:
        return int(self.block.sums.shape[1])  # the block's width, no row view made

    def __reduce__(self) -> tuple[Any, ...]:
        return Cofactor, (self.lo, self.count, self.sums, self.quad)


# lo: u32, k: u32, byte length of the count: u8, then the count (signed little-endian), the sums and
# the upper triangle as little-endian float64 (§2.5); a float payload whose products are its sums'
# products (``rank_one``) sets k's top bit (RANK_ONE) and leaves the products out. Exact payloads (§8)
# follow the count with a u32 width w and every sum and product as a w-byte signed little-endian int; w
# is 8 whenever every value fits 64 bits, else the least width that fits them all (equal payloads give
# equal bytes).
_HEADER = struct.Struct("<IIB")
_WIDTH = struct.Struct("<I")
_F8 = np.dtype("<f8")
_I8 = np.dtype("<i8")


def int_to_bytes(value: int) -> bytes:
    """The shortest signed little-endian encoding of an exact int (0 → empty)."""
    return value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True) if value else b""


class CofactorRing:
    """Degree-m matrix ring over the lifted variables ``lifted`` (view-tree preorder), §2.1 to §2.5;
    exact over ints counting 10^-decimals units when ``decimals`` is given (§8)."""

    name = "cofactor"

    def __init__(self, lifted: Sequence[str], decimals: int | None = None) -> None:
        if len(set(lifted)) != len(lifted):
            raise ValueError(f"lifted variables must be distinct: {list(lifted)}")
        self.decimals = None if decimals is None else check_decimals(decimals)
        self.exact = self.decimals is not None
        self._coefficient: type[int] | type[float] = int if self.exact else float
        self.variables: tuple[str, ...] = tuple(lifted)
        self.index: dict[str, int] = {v: i for i, v in enumerate(self.variables)}
        self._zero = Cofactor(0, 0)
        self._one = Cofactor(0, 1)

    def zero(self) -> Cofactor:
        return self._zero

    def one(self) -> Cofactor:
        return self._one

    def add(self, a: Cofactor, b: Cofactor) -> Cofactor:
        """Componentwise sum; both blocks must be equal unless one is empty (§2.3)."""
        if not b.k:
            return Cofactor(a.lo, a.count + b.count, a.sums, a.quad) if b.count else a
        if not a.k:
            return Cofactor(b.lo, a.count + b.count, b.sums, b.quad) if a.count else b
        if a.lo != b.lo or a.k != b.k:
            raise BlockLayoutError(f"adding blocks [{a.lo}, {a.hi}) and [{b.lo}, {b.hi}) of different views")
        return Cofactor(a.lo, a.count + b.count, a.sums + b.sums, a.quad + b.quad)

    def mul(self, a: Cofactor, b: Cofactor) -> Cofactor:
        """``(c_a c_b, c_b s_a + c_a s_b, c_b Q_a + c_a Q_b + s_a s_bᵀ + s_b s_aᵀ)``, adjacent blocks (§2.3).

        Operands may come in either order; the block with the lower index goes first.
        """
        if not a.k or not b.k:
            scalar, block = (a, b) if not a.k else (b, a)
            return self.scale(scalar.count, block)
        if a.lo > b.lo:
            a, b = b, a
        if a.hi != b.lo:
            raise BlockLayoutError(
                f"multiplying non-adjacent or overlapping blocks [{a.lo}, {a.hi}) and [{b.lo}, {b.hi}): "
                "partial products must cover contiguous preorder ranges"
            )
        ca, cb = self._coefficient(a.count), self._coefficient(b.count)
        sums = np.concatenate((cb * a.sums, ca * b.sums))
        parts = np.concatenate((cb * a.quad, np.outer(a.sums, b.sums).ravel(), ca * b.quad))
        return Cofactor(a.lo, a.count * b.count, sums, parts[product_layout(a.k, b.k)])

    def neg(self, a: Cofactor) -> Cofactor:
        return Cofactor(a.lo, -a.count, -a.sums, -a.quad)

    def scale(self, k: int, a: Cofactor) -> Cofactor:
        if k == 1:
            return a
        f = self._coefficient(k)
        return Cofactor(a.lo, k * a.count, f * a.sums, f * a.quad)

    def is_zero(self, a: Cofactor) -> bool:
        """Zero iff count, every sum and every product are zero (a cancelled count is not enough, §2.4)."""
        return a.count == 0 and not a.sums.any() and not a.quad.any()

    def lifts(self, var: str) -> bool:
        return var in self.index

    def lift(self, var: str, value: Any) -> Cofactor:
        """``g_j(x) = (1, x·e_j, x²·e_j e_jᵀ)``; variables that are not lifted give ``one()``."""
        j = self.index.get(var)
        if j is None:
            return self._one
        if self.decimals is not None:
            u = to_units(value, self.decimals)
            return Cofactor(j, 1, exact_array((u,)), exact_array((u * u,)))
        x = float(value)
        return Cofactor(j, 1, (x,), (x * x,))

    def lift_block(self, variables: Sequence[str], values: Sequence[Any]) -> Cofactor:
        """The product of the lifts of consecutive variables, ``(1, x⃗, x⃗x⃗ᵀ)``, built in one step (§2.3).

        Used for the private variables of a relation that a leaf marginalizes together.
        """
        idx = [self.index[v] for v in variables]
        if not idx:
            return self._one
        if idx != list(range(idx[0], idx[0] + len(idx))):
            raise BlockLayoutError(f"variables {list(variables)} are not consecutive in preorder")
        if self.decimals is not None:
            u = exact_array([to_units(v, self.decimals) for v in values])
            return Cofactor(idx[0], 1, u, upper(np.outer(u, u)))
        x = np.asarray([float(v) for v in values], dtype=np.float64)
        return Cofactor(idx[0], 1, x, upper(np.outer(x, x)))

    def encode(self, a: Cofactor) -> bytes:
        count = int_to_bytes(a.count)
        if self.exact:
            return (
                _HEADER.pack(a.lo, a.k, len(count)) + count + _encode_ints(np.concatenate((a.sums, a.quad)))
            )
        if rank_one(a.sums, a.quad):
            return b"".join(
                (
                    _HEADER.pack(a.lo, a.k | RANK_ONE, len(count)),
                    count,
                    a.sums.astype(_F8, copy=False).tobytes(),
                )
            )
        return b"".join(
            (
                _HEADER.pack(a.lo, a.k, len(count)),
                count,
                a.sums.astype(_F8, copy=False).tobytes(),
                a.quad.astype(_F8, copy=False).tobytes(),
            )
        )

    def decode(self, data: bytes) -> Cofactor:
        lo, k, n = _HEADER.unpack_from(data)
        at = _HEADER.size
        count = int.from_bytes(data[at : at + n], "little", signed=True)
        at += n
        if self.exact:
            values = _decode_ints(data, at, k + tri_size(k))
            return Cofactor(lo, count, exact_array(values[:k]), exact_array(values[k:]))
        compact = bool(k & RANK_ONE)
        k &= RANK_ONE - 1
        if at + 8 * (k + (0 if compact else tri_size(k))) != len(data):
            raise ValueError(f"cofactor payload of {len(data)} bytes does not match its header")
        sums = np.frombuffer(data, dtype=_F8, count=k, offset=at).astype(np.float64)
        if compact:
            with np.errstate(all="ignore"):  # infinite products are stored ones too
                return Cofactor(lo, count, sums, upper(np.outer(sums, sums)))
        quad = np.frombuffer(data, dtype=_F8, count=tri_size(k), offset=at + 8 * k)
        return Cofactor(lo, count, sums, quad.astype(np.float64))

    def to_json(self, a: Cofactor) -> dict[str, Any]:
        """Count, sums and the full symmetric ``sumprod`` matrix over *all* lifted variables (§2.6);
        exact payloads as the nearest floats of their exact values (§8)."""
        s, q = a.dense(0, len(self.variables))
        out = {"count": a.count, "variables": list(self.variables), "sum": s.tolist(), "sumprod": q.tolist()}
        if self.decimals is not None:
            e = self.decimals
            out["sum"] = [from_units(v, e) for v in out["sum"]]
            out["sumprod"] = [[from_units(v, 2 * e) for v in row] for row in out["sumprod"]]
        return out


def _encode_ints(values: FloatArray) -> bytes:
    """The width and the values (an object array of ints), each as a signed little-endian int of that
    width (the format above)."""
    try:
        return _WIDTH.pack(8) + values.astype(_I8).tobytes()
    except OverflowError:
        ints: list[int] = values.tolist()
        width = max((v.bit_length() + 8) // 8 for v in ints)
        return _WIDTH.pack(width) + b"".join(v.to_bytes(width, "little", signed=True) for v in ints)


def _decode_ints(data: bytes, at: int, n: int) -> list[int]:
    (width,) = _WIDTH.unpack_from(data, at)
    at += _WIDTH.size
    if at + n * width != len(data):
        raise ValueError(f"exact cofactor payload of {len(data)} bytes does not match its header")
    if width == 8:
        values: list[int] = np.frombuffer(data, dtype=_I8, count=n, offset=at).tolist()
        return values
    return [
        int.from_bytes(data[at + i * width : at + (i + 1) * width], "little", signed=True) for i in range(n)
    ]


def make_cofactor_ring(lifted: Sequence[str], **options: Any) -> CofactorRing:
    """Registry factory: ``"cofactor": make_cofactor_ring``; option ``decimals`` (an int, or None for
    floats) makes it exact (§8); option ``payload`` is ``block`` here (``make_ring`` builds ``dense``)."""
    unknown = set(options) - {"decimals", "payload"}
    if unknown:
        raise ValueError(
            f"the cofactor ring takes the options decimals and payload only, got {sorted(unknown)}"
        )
    if options.get("payload", "block") != "block":
        raise ValueError(f"the cofactor ring's payload is block or dense, got {options['payload']!r}")
    return CofactorRing(lifted, options.get("decimals"))


class CofactorRows:
    """n payloads of one block in columns, for batch evaluation (§2.7): counts int64[n] (exact while
    they fit in 64 bits), sums float64[n, k], quad float64[n, k(k+1)/2]."""

    __slots__ = ("counts", "lo", "quad", "sums")

    def __init__(self, lo: int, counts: Any, sums: Any, quad: Any) -> None:
        self.counts = np.asarray(counts, dtype=np.int64)
        self.sums = np.asarray(sums, dtype=np.float64)
        self.quad = np.asarray(quad, dtype=np.float64)
        n, k = self.sums.shape
        if len(self.counts) != n or self.quad.shape != (n, tri_size(k)):
            raise BlockLayoutError(
                f"columns of {len(self.counts)} counts, sums {self.sums.shape}, quad {self.quad.shape}"
            )
        self.lo = lo if k else 0

    @classmethod
    def of(cls, payloads: Sequence[Cofactor]) -> CofactorRows:
        """Payloads of one block (empty blocks allowed only when all are empty) as columns."""
        n = len(payloads)
        lo, k = (payloads[0].lo, len(payloads[0].sums)) if n else (0, 0)
        counts = np.empty(n, dtype=np.int64)
        sums, quad = np.empty((n, k)), np.empty((n, tri_size(k)))
        if not kernels.gather_into(payloads, lo, counts, sums, quad, RowCofactor):
            blocks = {(p.lo, p.k) for p in payloads}
            raise BlockLayoutError(f"rows of different blocks {sorted(blocks)}")
        return cls(lo, counts, sums, quad)

    def __len__(self) -> int:
        return len(self.counts)

    def row(self, i: int) -> Cofactor:
        return Cofactor(self.lo, int(self.counts[i]), self.sums[i].copy(), self.quad[i].copy())


def mul_rows(a: CofactorRows, b: CofactorRows) -> CofactorRows:
    """Row i of the result is ``a[i] · b[i]``: the block product of §2.3, vectorized over rows."""
    if len(a) != len(b):
        raise ValueError(f"row counts differ: {len(a)} and {len(b)}")
    ka, kb = a.sums.shape[1], b.sums.shape[1]
    if ka and kb and a.lo > b.lo:
        a, b, ka, kb = b, a, kb, ka
    if ka and kb and a.lo + ka != b.lo:
        raise BlockLayoutError(f"multiplying non-adjacent or overlapping blocks at {a.lo}+{ka} and {b.lo}")
    n, k = len(a), ka + kb
    counts = np.empty(n, dtype=np.int64)
    sums = np.empty((n, k), dtype=np.float64)
    quad = np.empty((n, tri_size(k)), dtype=np.float64)
    c = np.ascontiguousarray
    kernels.mul_rows_into(
        c(a.counts), c(a.sums), c(a.quad), c(b.counts), c(b.sums), c(b.quad), counts, sums, quad
    )
    return CofactorRows(a.lo if ka else b.lo, counts, sums, quad)


def mul_chain(factors: Sequence[CofactorRows]) -> CofactorRows:
    """Row i is the product of the factors' rows i, multiplied in order, as ``mul_rows`` would one
    after the other (the same products, each element the same IEEE product), in one pass over the rows:
    a row's partial products never leave the row's buffers."""
    first = factors[0]
    n = len(first)
    if len(factors) == 1:
        return first
    lo, k = first.lo, first.sums.shape[1]
    swaps = []
    for b in factors[1:]:
        if len(b) != n:
            raise ValueError(f"row counts differ: {n} and {len(b)}")
        kb = b.sums.shape[1]
        swap = bool(k and kb and lo > b.lo)
        a_lo, a_k, b_lo = (b.lo, kb, lo) if swap else (lo, k, b.lo)
        if k and kb and a_lo + a_k != b_lo:
            raise BlockLayoutError(
                f"multiplying non-adjacent or overlapping blocks at {a_lo}+{a_k} and {b_lo}"
            )
        lo = a_lo if (kb if swap else k) else b_lo
        k += kb
        swaps.append(swap)
    counts = np.empty(n, dtype=np.int64)
    sums = np.empty((n, k), dtype=np.float64)
    quad = np.empty((n, tri_size(k)), dtype=np.float64)
    c = np.ascontiguousarray
    slots = [(c(f.counts), c(f.sums), c(f.quad)) for f in factors]
    kernels.mul_chain_into(slots, swaps, counts, sums, quad)
    return CofactorRows(lo, counts, sums, quad)


def sum_by(groups: npt.ArrayLike, rows: CofactorRows) -> tuple[npt.NDArray[Any], CofactorRows]:
    """The ring sum of the rows of each group: the distinct group ids (sorted) and one row per id.

    Sort by group, then ``np.add.reduceat`` over each run (§2.7).
    """
    ids = np.asarray(groups)
    if len(ids) != len(rows):
        raise ValueError(f"{len(ids)} group ids for {len(rows)} rows")
    if not len(ids):
        return ids, rows
    in_order = bool((ids[1:] >= ids[:-1]).all())  # already sorted (one group, say): no gather
    order = None if in_order else np.argsort(ids, kind="stable")
    sorted_ids = ids if order is None else ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])

    def reduce(col: npt.NDArray[Any]) -> npt.NDArray[Any]:
        # the rows in group order as one C-contiguous array, as the gather would make them
        return np.add.reduceat(np.ascontiguousarray(col) if order is None else col[order], starts, axis=0)

    summed = CofactorRows(rows.lo, reduce(rows.counts), reduce(rows.sums), reduce(rows.quad))
    return sorted_ids[starts], summed
