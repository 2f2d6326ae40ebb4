"""The relational ring F[Z]: payloads that list query results (docs/fivm/rings.md §4).

A payload is a Z-relation over some of the query's output variables: rows mapped to non-zero
multiplicities. Sum is union (multiplicities add, rows reaching zero vanish), product is the
Cartesian product (the schemas of the factors of one product are disjoint), ``0 = {}`` and
``1 = {() -> 1}``. The lift of an output variable is the one-row relation ``{(x,) -> 1}``, the lift of
any other variable is ``1``; with every variable marginalized the root payload lists the join.

Schemas are tracked in the payload: ``schema`` is the ascending tuple of the preorder indexes of its
columns, and every row lists its values in that order, whatever order the factors were multiplied
in. Results are therefore canonical: equal relations have equal schemas and equal row dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import msgspec

from ivmstream.services.fivm.rings.cofactor import BlockLayoutError

Row = tuple[Any, ...]


class Listing:
    """A Z-relation payload: ``rows`` (non-zero multiplicities) over the columns ``schema`` (§4.1)."""

    __slots__ = ("rows", "schema")

    def __init__(self, schema: tuple[int, ...], rows: dict[Row, int]) -> None:
        self.schema = schema
        self.rows = rows

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Listing):
            return NotImplemented
        mine = {t: m for t, m in self.rows.items() if m}
        theirs = {t: m for t, m in other.rows.items() if m}
        return mine == theirs and (not mine or self.schema == other.schema)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Listing(schema={self.schema}, rows={self.rows})"

    @property
    def size(self) -> int:
        """Σ multiplicities: the number of result tuples counted with multiplicity."""
        return sum(self.rows.values())


@lru_cache(maxsize=1024)
def _interleave(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The product's schema and, unless ``sa`` entirely precedes ``sb``, where to read each column of it
    from the concatenation ``row_a + row_b``."""
    if set(sa) & set(sb):
        raise BlockLayoutError(f"listing payloads over {sa} and {sb} share a column (lifted twice)")
    merged = tuple(sorted(sa + sb))
    if not sa or not sb or sa[-1] < sb[0]:
        return merged, None
    source = sa + sb
    return merged, tuple(source.index(col) for col in merged)


class ListingRing:
    """F[Z] over the output variables ``lifted`` (view-tree preorder); others lift to ``1`` (§4)."""

    name = "listing"

    def __init__(self, lifted: Sequence[str], *, rows: bool = False) -> None:
        if len(set(lifted)) != len(lifted):
            raise ValueError(f"lifted variables must be distinct: {list(lifted)}")
        self.variables: tuple[str, ...] = tuple(lifted)
        self.index: dict[str, int] = {v: i for i, v in enumerate(self.variables)}
        self.with_rows = rows

    def zero(self) -> Listing:
        return Listing((), {})

    def one(self) -> Listing:
        return Listing((), {(): 1})

    def add(self, a: Listing, b: Listing) -> Listing:
        """Union; rows whose multiplicity reaches zero vanish. An empty relation has any schema."""
        if not b.rows:
            return a
        if not a.rows:
            return b
        if a.schema != b.schema:
            raise BlockLayoutError(f"adding listing payloads over different schemas {a.schema}, {b.schema}")
        rows = dict(a.rows)
        for t, m in b.rows.items():
            total = rows.get(t, 0) + m
            if total:
                rows[t] = total
            else:
                rows.pop(t, None)
        return Listing(a.schema, rows)

    def sum_all(self, payloads: Sequence[Listing]) -> Listing:
        """The sum of ``payloads`` merged into one fresh map: a view's key met by many join rows of a
        batch costs one pass over their rows instead of a copy per row (docs/fivm/algorithm.md §2.14)."""
        live = [p for p in payloads if p.rows]
        if len(live) <= 1:
            return live[0] if live else self.zero()
        schema = live[0].schema
        rows: dict[Row, int] = {}
        for p in live:
            if p.schema != schema:
                raise BlockLayoutError(f"adding listing payloads over different schemas {schema}, {p.schema}")
            for t, m in p.rows.items():
                rows[t] = rows.get(t, 0) + m
        return Listing(schema, {t: m for t, m in rows.items() if m})

    def mul(self, a: Listing, b: Listing) -> Listing:
        """Cartesian product over disjoint schemas, columns in preorder (§4.2)."""
        if not a.rows or not b.rows:
            return self.zero()
        schema, gather = _interleave(a.schema, b.schema)
        rows: dict[Row, int] = {}
        if gather is None:
            for ta, ma in a.rows.items():
                for tb, mb in b.rows.items():
                    rows[ta + tb] = ma * mb
        else:
            for ta, ma in a.rows.items():
                for tb, mb in b.rows.items():
                    both = ta + tb
                    rows[tuple(both[i] for i in gather)] = ma * mb
        return Listing(schema, rows)

    def neg(self, a: Listing) -> Listing:
        return Listing(a.schema, {t: -m for t, m in a.rows.items()})

    def scale(self, k: int, a: Listing) -> Listing:
        if not k:
            return self.zero()
        return Listing(a.schema, {t: k * m for t, m in a.rows.items()})

    def is_zero(self, a: Listing) -> bool:
        return not any(a.rows.values())

    def lifts(self, var: str) -> bool:
        return var in self.index

    def lift(self, var: str, value: Any) -> Listing:
        """``{(x,) -> 1}`` for an output variable, ``1`` for any other (§4.1)."""
        j = self.index.get(var)
        return self.one() if j is None else Listing((j,), {(value,): 1})

    def columns(self, a: Listing) -> list[str]:
        return [self.variables[i] for i in a.schema]

    def result_columns(self, a: Listing) -> list[str]:
        """The columns a result reports: its schema's, or for the empty relation (which has every
        schema, §4.2) every output variable, as any non-empty root has. So a result's columns depend
        neither on whether rows exist nor on the sums and products that reached zero."""
        return self.columns(a) if not self.is_zero(a) else list(self.variables)

    # msgpack ``[schema, [[value..., multiplicity], ...]]``; values are scalars msgpack keeps exactly
    # (ints, floats, strings, bytes, bools, None) and multiplicities fit in 64 bits (§4.3).
    def encode(self, a: Listing) -> bytes:
        return msgspec.msgpack.encode([a.schema, [[*t, m] for t, m in a.rows.items()]])

    def decode(self, data: bytes) -> Listing:
        schema, rows = msgspec.msgpack.decode(data)
        return Listing(tuple(schema), {tuple(r[:-1]): r[-1] for r in rows})

    def to_json(self, a: Listing) -> dict[str, Any]:
        """``join_size`` (Σ multiplicities) and ``distinct`` rows; the rows themselves if configured."""
        out: dict[str, Any] = {"join_size": a.size, "distinct": sum(1 for m in a.rows.values() if m)}
        if self.with_rows:
            out["columns"] = self.result_columns(a)
            out["rows"] = [[*t, m] for t, m in sorted_rows(a.rows.items()) if m]
        return out


def sorted_rows(rows: Iterable[tuple[Row, int]]) -> list[tuple[Row, int]]:
    """Rows in a deterministic order even when a column mixes value types (ints with strings)."""
    return sorted(rows, key=lambda tm: tuple((type(v).__name__, v) for v in tm[0]))


def make_listing_ring(lifted: Sequence[str], **options: Any) -> ListingRing:
    """Registry factory: ``"listing": make_listing_ring``; option ``rows`` puts the rows in results."""
    unknown = set(options) - {"rows"}
    if unknown:
        raise ValueError(f"the listing ring takes only the option 'rows', got {sorted(unknown)}")
    return ListingRing(lifted, rows=bool(options.get("rows", False)))
