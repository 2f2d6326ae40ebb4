"""Ring payloads as Spark columns, for the batch jobs (docs/fivm/algorithm.md §8).

A payload is one column per component, so every ring operation is a SQL expression and a ring sum is
a ``GROUP BY`` with ``SUM`` per component:

* count and sum rings: one component, the value (``count`` here);
* the covariance (cofactor) ring: ``count``, one sum ``s_j`` per lifted variable j of the view's block
  and one product ``q_i_j`` (i <= j) per pair — the upper triangle the engine stores.

Exact payloads (counts, int sums, ``decimals``) are ``DECIMAL(38, 0)``, whose overflow Spark's ANSI
mode turns into an error rather than a wrong value; float payloads are doubles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import reduce
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, DoubleType

EXACT = DecimalType(38, 0)
FLOAT = DoubleType()
MAX_DIGITS = 38
# Converting a float's decimal spelling never rounds to a context precision (the result is an integer).
_CONTEXT = Context(prec=400, rounding=ROUND_HALF_EVEN, Emax=999_999, Emin=-999_999)


@dataclass(frozen=True)
class Payload:
    """Component expressions; ``count`` None means the constant 1 (a lift's count)."""

    count: Column | None
    sums: dict[int, Column] = field(default_factory=dict)
    quad: dict[tuple[int, int], Column] = field(default_factory=dict)


def _times(a: Column, b: Column | None) -> Column:
    return a if b is None else a * b


def _product_of(columns: Sequence[Column | None]) -> Column | None:
    present = [c for c in columns if c is not None]
    return reduce(lambda a, b: a * b, present) if present else None


def product(factors: Sequence[Payload]) -> Payload:
    """The ring product of payloads over disjoint lifted variables (multilinear in the factors):
    ``c = Π c_f``; ``s_j = s_{f,j} Π_{g≠f} c_g``; ``q_ij = q_{f,ij} Π_{g≠f} c_g`` inside one factor and
    ``s_{f,i} s_{g,j} Π_{h≠f,g} c_h`` across two (docs/fivm/rings.md §2.3)."""

    def counts_except(*skip: int) -> Column | None:
        return _product_of([f.count for i, f in enumerate(factors) if i not in skip])

    sums: dict[int, Column] = {}
    quad: dict[tuple[int, int], Column] = {}
    for a, f in enumerate(factors):
        rest = counts_except(a)
        for j, s in f.sums.items():
            sums[j] = _times(s, rest)
        for ij, q in f.quad.items():
            quad[ij] = _times(q, rest)
        for b in range(a + 1, len(factors)):
            g = factors[b]
            if not f.sums or not g.sums:
                continue
            rest2 = counts_except(a, b)
            for i, si in f.sums.items():
                for j, sj in g.sums.items():
                    quad[(min(i, j), max(i, j))] = _times(si * sj, rest2)
    return Payload(counts_except(), sums, quad)


def scalar(value: Column) -> Payload:
    return Payload(value)


def covariance_lift(index: int, x: Column) -> Payload:
    """``g_j(x) = (1, x e_j, x² e_j e_jᵀ)``."""
    return Payload(None, {index: x}, {(index, index): x * x})


def names(block: Sequence[int], cofactor: bool) -> list[str]:
    """The component column names of a payload over the lifted indexes ``block`` (ascending)."""
    if not cofactor:
        return ["c"]
    out = ["c"] + [f"s{j}" for j in block]
    out += [f"q{block[a]}_{block[b]}" for a in range(len(block)) for b in range(a, len(block))]
    return out


def columns(p: Payload, block: Sequence[int], cofactor: bool, one: Column, prefix: str = "") -> list[Column]:
    """The payload as named columns (``one``: the count when it is the constant 1)."""
    exprs: list[Column] = [(p.count if p.count is not None else one).alias(prefix + "c")]
    if cofactor:
        exprs += [p.sums[j].alias(f"{prefix}s{j}") for j in block]
        exprs += [
            p.quad[(block[a], block[b])].alias(f"{prefix}q{block[a]}_{block[b]}")
            for a in range(len(block))
            for b in range(a, len(block))
        ]
    return exprs


def read(block: Sequence[int], cofactor: bool, prefix: str = "") -> Payload:
    """The payload stored in columns named by ``names`` (with ``prefix``)."""
    if not cofactor:
        return Payload(F.col(prefix + "c"))
    return Payload(
        F.col(prefix + "c"),
        {j: F.col(f"{prefix}s{j}") for j in block},
        {
            (block[a], block[b]): F.col(f"{prefix}q{block[a]}_{block[b]}")
            for a in range(len(block))
            for b in range(a, len(block))
        },
    )


def ring_sum(block: Sequence[int], cofactor: bool) -> list[Column]:
    """The aggregate expressions of a ring sum over rows holding a payload in ``names`` columns."""
    return [F.sum(n).alias(n) for n in names(block, cofactor)]


def nonzero(block: Sequence[int], cofactor: bool) -> Column:
    """A payload is zero iff every component is (never the count alone: fivm-rings.md §1.3)."""
    return reduce(lambda a, b: a | b, [F.col(n) != 0 for n in names(block, cofactor)])


def decimal_units(value: float, decimals: int) -> Decimal:
    """The exact number of 10^-decimals units in the decimal a float spells (its shortest round-trip
    text), rounded half to even (docs/fivm/rings.md §8)."""
    units = Decimal(repr(float(value))).scaleb(decimals, context=_CONTEXT)
    exact = units.to_integral_value(rounding=ROUND_HALF_EVEN, context=_CONTEXT)
    if exact.adjusted() >= MAX_DIGITS:
        raise ArithmeticError(f"{value!r} in {decimals} decimals has more than {MAX_DIGITS} digits")
    return exact


def units(x: Column, type_name: str, decimals: int) -> Column:
    """A column's value in exact 10^-decimals units (ints scale exactly, floats by their spelling)."""
    if type_name == "int":
        return x.cast(EXACT) * F.lit(10**decimals).cast(EXACT)
    return units_udf(decimals)(x)


def units_udf(decimals: int) -> Any:
    """A Python UDF: floats to their exact ``decimals`` units (``decimal_units``)."""
    return F.udf(lambda v: decimal_units(v, decimals), EXACT)
