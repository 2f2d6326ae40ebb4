"""The row loops of column execution (services/fivm/columnar.py): the block product of two columns of
cofactor payloads, the lifts of a leaf's tuples, and the moves between payload objects and columns.

Each is written here with numpy, the reference, and compiled in the ``_kernels`` extension (its sources
listed in ``_kernels.h``; built by setup.py where a C compiler is present). The numpy forms build
concatenations and gathers of whole columns; the compiled loops write each output element once, in
place. The module exports the compiled functions when they are built and ``IVMSTREAM_PURE_PYTHON`` is
not ``1``, else the numpy ones. Both compute each element as the same IEEE product, so their results are
equal bit for bit (tests/unit/fivm/test_fivm_kernels.py).
"""

from __future__ import annotations

import math
import operator
import os
import struct
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from itertools import chain, compress, repeat, takewhile
from operator import is_not
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


def py_mul_chain_into(
    slots: Sequence[tuple[Ints, Floats, Floats]],
    swaps: Sequence[bool],
    counts: Ints,
    sums: Floats,
    quad: Floats,
) -> None:
    """Row i of the outputs is the product of row i of every slot (a ``(counts, sums, quad)`` triple) in
    order: ``P = slot 0``, then ``P = P·s_j``, or ``s_j·P`` where ``swaps[j - 1]`` (s_j's block first),
    each step ``py_mul_rows_into``."""
    if len(slots) < 2 or len(swaps) != len(slots) - 1:
        raise ValueError("mul_chain_into: at least two slots and one swap flag per step")
    pc, ps, pq = slots[0]
    for j, (sc, ss, sq) in enumerate(slots[1:], start=1):
        n, k = len(pc), ps.shape[1] + ss.shape[1]
        if j == len(slots) - 1:
            nc, ns, nq = counts, sums, quad
        else:
            nc, ns, nq = np.empty(n, np.int64), np.empty((n, k)), np.empty((n, k * (k + 1) // 2))
        if swaps[j - 1]:
            py_mul_rows_into(sc, ss, sq, pc, ps, pq, nc, ns, nq)
        else:
            py_mul_rows_into(pc, ps, pq, sc, ss, sq, nc, ns, nq)
        pc, ps, pq = nc, ns, nq


def py_probe_get(
    data: Mapping[Any, Any], keys: list[Any], rows: list[Any]
) -> tuple[list[Any], list[int] | None, list[Any]]:
    """One sibling's point lookups for every join row: ``(found, keep, kept)``, found the payloads
    ``data[keys[i]]`` present, in row order; keep None and kept ``rows`` itself when all are present,
    else the indexes of the rows that found one, and those rows."""
    if len(keys) != len(rows):
        raise TypeError("probe_get: a dict, and keys and rows as lists of one length")
    hits = list(map(data.get, keys))
    keep = list(compress(range(len(hits)), map(is_not, hits, repeat(None))))
    if len(keep) == len(hits):
        return hits, None, rows
    return [hits[j] for j in keep], keep, [rows[j] for j in keep]


def py_probe_all(
    datas: list[Mapping[Any, Any]], keylists: list[list[Any]], rows: list[Any]
) -> tuple[list[list[Any]], list[int] | None, list[Any]]:
    """A step's point lookups in all its siblings: ``py_probe_get`` sibling after sibling, each on the
    rows the ones before it kept. ``(found, keep, kept)``: per sibling the payloads of the kept rows;
    keep None and kept ``rows`` itself when every row is kept, else the kept rows' indexes and rows."""
    if len(datas) != len(keylists) or any(len(keys) != len(rows) for keys in keylists):
        raise TypeError("probe_all: each sibling a dict and a key list of one per row")
    keep: list[int] | None = None
    found: list[list[Any]] = []
    for data, keys in zip(datas, keylists, strict=True):
        if keep is not None:
            keys = [keys[j] for j in keep]
        hits, sub, _ = py_probe_get(data, keys, keys)
        if sub is not None:
            keep = sub if keep is None else [keep[j] for j in sub]
            found = [[f[j] for j in sub] for f in found]
        found.append(hits)
    if keep is None:
        return found, None, rows
    return found, keep, [rows[j] for j in keep]


def py_install_new(
    data: dict[Any, Any],
    seq: dict[Any, int],
    changed: dict[Any, None],
    delta: list[tuple[Any, Any]],
    next_seq: int,
) -> tuple[int, list[tuple[Any, Any]]]:
    """A view's grouped batch (distinct keys, non-zero payloads) installed where its keys are new: every
    key marked changed, each new key stored with the next creation number, in ``delta``'s order.
    Returns the next creation number and the pairs of the keys ``data`` held, in order."""
    keys = list(map(_FIRST, delta))
    changed.update(dict.fromkeys(keys))
    held = data.keys() & keys
    fresh = [kv for kv in delta if kv[0] not in held] if held else delta
    data.update(fresh)
    seq.update(zip(map(_FIRST, fresh), range(next_seq, next_seq + len(fresh)), strict=True))
    return next_seq + len(fresh), [kv for kv in delta if kv[0] in held] if held else []


_SEQ = struct.Struct(">Q")  # services/fivm/state.py's creation number prefix
_HEADER = struct.Struct("<IIB")  # CofactorRing.encode's block header
RANK_ONE = 1 << 31  # set in the header's k: the products are left out, as they are the sums' products


def rank_one(sums: Floats, quad: Floats) -> bool:
    """Whether every product of the upper triangle is, bit for bit, the product of its two sums and
    none is NaN (one tuple's lift at multiplicity 1 is such a payload): multiplying the sums then gives
    the products back exactly on any IEEE machine, so an encoding need not store them."""
    k = len(sums)
    if not k:
        return False
    rows, cols = _triu(k)
    with np.errstate(all="ignore"):
        products = np.asarray(sums, dtype=np.float64)[rows] * np.asarray(sums, dtype=np.float64)[cols]
    if np.isnan(products).any():
        return False
    return bool(np.array_equal(products.view(np.int64), np.asarray(quad, dtype=np.float64).view(np.int64)))


def py_view_values(items: list[tuple[int, Any] | None], row_cls: Any = None) -> list[bytes | None]:
    """The stored value of each (seq, payload) of a float cofactor view (None for None): the seq as a
    big-endian u64, then ``CofactorRing.encode``'s bytes: lo, k, the count's length, the count in its
    shortest signed little-endian form, the sums and products as little-endian float64 (the products
    left out, and k's top bit set, for a ``rank_one`` payload). OverflowError
    for a count beyond int64 (the caller then encodes in Python)."""
    out: list[bytes | None] = []
    for item in items:
        if item is None:
            out.append(None)
            continue
        seq, p = item
        if not -(2**63) <= p.count < 2**63:
            raise OverflowError("view_entries: a count beyond int64")
        count = p.count.to_bytes((p.count.bit_length() + 8) // 8, "little", signed=True) if p.count else b""
        sums, quad = np.asarray(p.sums, dtype="<f8"), np.asarray(p.quad, dtype="<f8")
        if rank_one(sums, quad):
            out.append(
                _SEQ.pack(seq) + _HEADER.pack(p.lo, len(sums) | RANK_ONE, len(count)) + count + sums.tobytes()
            )
            continue
        head = _SEQ.pack(seq) + _HEADER.pack(p.lo, len(sums), len(count))
        out.append(head + count + sums.tobytes() + quad.tobytes())
    return out


def py_view_entries(
    name: str, keys: Mapping[Any, Any], data: Mapping[Any, Any], seq: Mapping[Any, int], row_cls: Any,
    key_of: Callable[[Any], bytes],
) -> list[tuple[str, bytes, bytes | None]]:  # fmt: skip
    """The checkpoint entry ``(name, key_of(key), value)`` of each of ``keys`` in its order: the value as
    ``py_view_values`` writes it from ``seq[key]`` and ``data[key]``, None where ``data`` lacks the key."""
    listed = list(keys)
    items = [None if (p := data.get(key)) is None else (seq[key], p) for key in listed]
    values = py_view_values(items, row_cls)
    return [(name, key_of(key), value) for key, value in zip(listed, values, strict=True)]


def py_columns_into(rows: Sequence[tuple[Any, ...]], positions: Sequence[int], out: Floats) -> None:
    """``out[i, j] = float(rows[i][positions[j]])``, numbers converted as numpy converts them."""
    n, w = out.shape
    if len(rows) != n or len(positions) != w:
        raise ValueError("columns_into: array shapes do not match")
    if n and w:
        out[:] = np.array([[row[p] for p in positions] for row in rows], dtype=np.float64)


def py_lift_into(x: Floats, mults: Ints, sums: Floats, quad: Floats) -> None:
    """Row i: ``sums = m_i·x_i`` and ``quad = m_i·(x_i x_iᵀ)``'s upper triangle, as ``m·(x_r·x_c)``."""
    rows, cols = _triu(x.shape[1])
    m = mults.astype(np.float64)[:, None]
    sums[:] = m * x
    quad[:] = m * (x[:, rows] * x[:, cols])


def py_gather_into(
    payloads: Sequence[Any], lo: int, counts: Ints, sums: Floats, quad: Floats, row_cls: Any = None
) -> bool:
    """The count, sums and upper triangle of each payload into row i of the columns; False when a
    payload's block is not ``[lo, lo + k)`` with k the columns' width. Payloads of class ``row_cls``
    (rows of columns, ``RowCofactor``) are read like any other here; the compiled loop copies their rows
    from the columns directly."""
    n, k = sums.shape
    if any(len(p.sums) != k or (k and p.lo != lo) for p in payloads):
        return False
    counts[:] = [p.count for p in payloads]
    if n:
        sums[:] = np.array([p.sums for p in payloads]).reshape(n, k)
        quad[:] = np.array([p.quad for p in payloads]).reshape(n, quad.shape[1])
    return True


def py_payload_rows(
    cls: Any, keys: list[Any], lo: int, counts: list[int], block: Any
) -> list[tuple[Any, Any]]:
    """``(keys[i], p_i)``: p_i a new ``cls`` (``RowCofactor``) made without ``__init__``: its lo, its
    count ``counts[i]``, the columns ``block`` and its row number i."""
    if len(counts) != len(keys) or len(block) != len(keys):
        raise ValueError("payload_rows: array shapes do not match")
    out = []
    for i, (key, count) in enumerate(zip(keys, counts, strict=True)):
        p = cls.__new__(cls)
        p.lo, p.count, p.block, p.row = lo, count, block, i
        out.append((key, p))
    return out


_INT_ONLY = {int}
_ONE_ONLY = {1}
_FLOAT_ONLY = {float}
_INF = math.inf
_DELTA = operator.attrgetter("delta")
_RELATION = operator.attrgetter("relation")
_FIRST = operator.itemgetter(0)
_ROW = operator.attrgetter("row")


def py_absorb_run(
    events: Sequence[Any],
    start: int,
    relation: str,
    columns: Sequence[str],
    batch: dict[tuple[Any, ...], int],
) -> int:
    """Add the run of ``relation``'s events from ``start`` (an all-float relation) to ``batch`` (the tuple
    of each row's values at ``columns`` -> summed multiplicity, tuples in order of first appearance,
    -0.0 stored as 0.0) with whole-run checks, each a C-level pass over the run, and return the index
    after the run; or return ``start``, leaving ``batch`` untouched, when the run is shorter than two
    events or any of them needs the per-event checks (services/fivm/intake.py)."""
    if start < 0:
        raise ValueError("absorb_run: start < 0")
    rest = events[start:] if start else events
    count = len(list(takewhile(relation.__eq__, map(_RELATION, rest))))
    if count < 2 or not _absorb(rest[:count], columns, batch):
        return start
    return start + count


def _absorb(run: Sequence[Any], columns: Sequence[str], batch: dict[tuple[Any, ...], int]) -> bool:
    deltas = list(map(_DELTA, run))
    if set(map(type, deltas)) - _INT_ONLY or 0 in deltas:
        return False
    rows = list(map(_ROW, run))
    if set(map(type, rows)) - {dict} or set(map(len, rows)) - {len(columns)}:
        return False
    get = operator.itemgetter(*columns)
    try:
        keys = list(map(get, rows)) if len(columns) > 1 else [(get(r),) for r in rows]
    except KeyError:
        return False
    if set(map(type, chain.from_iterable(keys))) - _FLOAT_ONLY:
        return False
    # Every value finite: NaN and ±inf make a row's total non-finite; a row whose total overflows from
    # finite values is checked value by value.
    if not all(-_INF < sum(k) < _INF or all(map(math.isfinite, k)) for k in keys):
        return False
    if 0.0 in chain.from_iterable(keys):  # -0.0 == 0.0: one encoding of zero
        keys = [k if 0.0 not in k else tuple([v + 0.0 for v in k]) for k in keys]
    if set(deltas) == _ONE_ONLY:
        counts: Mapping[tuple[Any, ...], int] = Counter(keys)
    else:
        acc: dict[tuple[Any, ...], int] = {}
        for k, m in zip(keys, deltas, strict=True):
            acc[k] = acc.get(k, 0) + m
        counts = acc
    if not batch:
        batch.update(counts)
    else:
        got = batch.get
        for k, m in counts.items():
            batch[k] = got(k, 0) + m
    return True


def py_absorb_columns(
    columns: Sequence[Sequence[Any]], deltas: Sequence[Any]
) -> dict[tuple[Any, ...], int] | None:
    """One all-float relation's batch given as ``columns`` (one per declared column, in declared order)
    and ``deltas``, summed into a new dict (the tuple of a row's values -> summed multiplicity, tuples
    in order of first appearance, -0.0 stored as 0.0), with whole-column checks, each a C-level pass;
    None when the batch is empty or any row needs the per-event checks (services/fivm/intake.py): a
    delta that is not an exact non-zero int, a value that is not a finite float."""
    if set(map(type, deltas)) != _INT_ONLY or 0 in deltas:
        return None
    columns = list(columns)
    for j, column in enumerate(columns):
        if set(map(type, column)) != _FLOAT_ONLY:
            return None
        # NaN and ±inf make the total non-finite; a total that overflows from finite values is
        # checked value by value.
        if not (-_INF < sum(column) < _INF or all(map(math.isfinite, column))):
            return None
        if 0.0 in column:  # -0.0 == 0.0: one encoding of zero
            columns[j] = [v + 0.0 for v in column]
    tuples = zip(*columns, strict=True) if columns else iter([()] * len(deltas))
    if set(deltas) == _ONE_ONLY:
        return dict(Counter(tuples))
    batch: dict[tuple[Any, ...], int] = {}
    for t, m in zip(tuples, deltas, strict=True):
        batch[t] = batch.get(t, 0) + m
    return batch


def _load() -> ModuleType | None:
    try:
        from ivmstream.services.fivm import _kernels
    except ImportError:
        return None
    return _kernels


compiled = _load()
ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV) != "1" else "python"

mul_rows_into: Callable[..., Any] = py_mul_rows_into
mul_chain_into: Callable[..., Any] = py_mul_chain_into
lift_into: Callable[..., Any] = py_lift_into
gather_into: Callable[..., bool] = py_gather_into
payload_rows: Callable[..., list[tuple[Any, Any]]] = py_payload_rows
absorb_run: Callable[..., int] = py_absorb_run
absorb_columns: Callable[..., dict[tuple[Any, ...], int] | None] = py_absorb_columns
columns_into: Callable[..., Any] = py_columns_into
probe_get: Callable[..., tuple[list[Any], list[int] | None, list[Any]]] = py_probe_get
install_new: Callable[..., tuple[int, list[tuple[Any, Any]]]] = py_install_new
probe_all: Callable[..., tuple[list[list[Any]], list[int] | None, list[Any]]] = py_probe_all
view_entries: Callable[..., list[tuple[str, bytes, bytes | None]]] = py_view_entries
if ACTIVE == "compiled":
    assert compiled is not None
    mul_rows_into = compiled.mul_rows_into
    mul_chain_into = compiled.mul_chain_into
    lift_into = compiled.lift_into
    gather_into = compiled.gather_into
    payload_rows = compiled.payload_rows
    absorb_run = compiled.absorb_run
    absorb_columns = compiled.absorb_columns
    columns_into = compiled.columns_into
    probe_get = compiled.probe_get
    install_new = compiled.install_new
    probe_all = compiled.probe_all
    view_entries = compiled.view_entries
