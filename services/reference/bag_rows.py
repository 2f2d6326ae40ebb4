"""The reference engine's batch update: one relation's rows applied to the bag in one pass.

Each row's member key is written and hashed, its multiplicity updated in event order in the bag's
resident dicts (``StoreBackedMap.resident_dicts``: ``dirty``, where None is a delete, and ``clean``; a
key is in one of them at most), a delete below zero refused unless negatives are allowed, and the
fingerprint and column sums accumulated over the applied rows. The compiled kernel
(``_kernels.bag_rows``, services/reference/_bag_rows.c) does it without a Python step per row;
``py_bag_rows`` is its Python form, used under ``IVMSTREAM_PURE_PYTHON=1`` and where the kernel is not
built. The kernel returns None (having changed nothing) for a batch with a value it does not write (a
float, an int beyond 64 bits, a decimal beyond the context's precision); the engine then applies the
batch in Python.

Result: ``(refused, applied, delta_total, distinct_change, fingerprint_add, sums)``: the refused rows'
``(row, multiplicity found)``, how many rows were applied, their deltas' total, the change in tuples of
nonzero multiplicity, the fingerprint's increment (mod 2^128) and each summed column's new sum.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import orjson

_MOD = 2**128
BagRows = tuple[list[tuple[int, int]], int, int, int, int, list[Any]]


def canonical_decimal(value: Decimal) -> str:
    """Equal decimals hash equally ("1.50" and "1.5", "-0" and "0"), as they are equal bag members."""
    return str((value + 0).normalize())


def py_bag_rows(
    relation: str,
    columns: list[list[Any]],
    decimal_columns: bytes,
    deltas: list[int],
    dirty: dict[bytes, int | None],
    clean: dict[bytes, int | None],
    allow_negative: bool,
    sum_columns: list[int],
    sums: list[Any],
    prec: int,
    decimal_type: type,
) -> BagRows | None:
    """The Python form of the compiled ``bag_rows`` (``prec`` is the kernel's limit: the Python form
    writes every value). A decimal column holds Decimals or the plain decimal strings they were written as."""
    del prec
    columns = [  # a decimal column's plain decimal strings (decimal_text) as the Decimals they read as
        [decimal_type(v) if type(v) is str else v for v in col] if flag else col
        for col, flag in zip(columns, decimal_columns, strict=True)
    ]
    forms = [
        list(map(canonical_decimal, col)) if flag else col
        for col, flag in zip(columns, decimal_columns, strict=True)
    ]
    refused: list[tuple[int, int]] = []
    applied = total = distinct = fingerprint = 0
    sums = list(sums)
    for i, values in enumerate(zip(*forms, strict=True)):
        key = b"%b" % orjson.dumps([relation, values])
        delta = deltas[i]
        if key in dirty:
            old, in_clean = dirty[key] or 0, False
        else:
            old, in_clean = clean.get(key) or 0, key in clean
        new = old + delta
        if new < 0 and not allow_negative:
            refused.append((i, old))
            continue
        if new != 0 or old != 0:  # as put and delete: the key leaves clean, dirty holds it (None: deleted)
            if in_clean:
                del clean[key]
            dirty[key] = new if new != 0 else None
        distinct += (new != 0) - (old != 0)
        total += delta
        applied += 1
        fingerprint += delta * int.from_bytes(hashlib.blake2b(key, digest_size=16).digest(), "big")
        for k, j in enumerate(sum_columns):
            sums[k] += columns[j][i] * delta
    return refused, applied, total, distinct, fingerprint % _MOD, sums


try:  # the compiled kernel (services/reference/_bag_rows.c), built by setup.py where a C compiler is present
    from ._kernels import bag_rows as compiled_bag_rows
except ImportError:  # pragma: no cover - a machine without a C compiler
    compiled_bag_rows = None  # type: ignore[assignment]

# Set IVMSTREAM_PURE_PYTHON=1 to apply batches in Python even where the kernel is built.
bag_rows: Callable[..., BagRows | None] = (
    compiled_bag_rows
    if compiled_bag_rows is not None and os.environ.get("IVMSTREAM_PURE_PYTHON", "") != "1"
    else py_bag_rows
)

# The column types whose member-key form the kernel writes (others go through BagEngine.member_keys).
KERNEL_TYPES = frozenset(("str", "int", "bool", "decimal"))


def decimal_flags(types: Sequence[str]) -> bytes:
    """``decimal_columns``: one byte per column, 1 for a decimal column."""
    return bytes(typ == "decimal" for typ in types)
