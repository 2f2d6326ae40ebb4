"""Range partitions: which fragment a value falls in, and the predicate that scans a set of fragments.

Fragment i covers ``[b_i, b_{i+1})`` with ``b_0 = -inf`` and ``b_{n+1} = +inf``: n boundaries give n + 1
fragments (docs/sketches/algorithm.md §2.1). The outer fragments are open so that values beyond the
boundaries inserted later still fall in a fragment. NULL falls in fragment 0 (it sorts before every
value), so the fragment count stays n + 1 and the use predicate says ``OR a IS NULL`` for fragment 0.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from typing import Any

from ivmstream.services.sketches.catalog import Table


@dataclass(frozen=True)
class RangeSpec:
    table: str
    column: str  # SQL name
    position: int  # the column's position in the table's rows
    boundaries: tuple[Any, ...]  # sorted, distinct
    offset: int  # first global fragment id of this table (ids of different tables are disjoint)

    @property
    def fragments(self) -> int:
        return len(self.boundaries) + 1

    def fragment(self, value: Any) -> int:
        """The local fragment id of a partition value (NULL: fragment 0)."""
        if value is None:
            return 0
        return bisect_right(self.boundaries, value)

    def bounds(self, local: int) -> tuple[Any, Any]:
        """``[low, high)`` of a fragment, None for an infinite end."""
        low = self.boundaries[local - 1] if local > 0 else None
        high = self.boundaries[local] if local < len(self.boundaries) else None
        return low, high

    def runs(self, locals_: list[int]) -> Iterator[tuple[int, int]]:
        """Maximal runs of consecutive fragment ids (adjacent ranges merge into one interval)."""
        start = prev = None
        for f in locals_:
            if prev is not None and f == prev + 1:
                prev = f
                continue
            if start is not None:
                yield start, prev  # type: ignore[misc]
            start = prev = f
        if start is not None:
            yield start, prev  # type: ignore[misc]


def _number(v: Any, where: str) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ValueError(f"{where}: boundaries must be numbers or strings, got {v!r}")
    return v


def parse_partition(v: Any, tables: Mapping[str, Table], read: set[str]) -> list[RangeSpec]:
    """``{table: {column, boundaries: [...]}}``, ``{table: {column, ranges: n, domain: [lo, hi]}}``
    (equal width) or ``{table: {column, ranges: n, sample: [...] | histogram: [[value, count], ...]}}``
    (equi-depth)."""
    if not isinstance(v, Mapping):
        raise ValueError("partition must map table names to {column, boundaries | ranges + domain}")
    specs: list[RangeSpec] = []
    offset = 0
    for name in sorted(v):
        spec = v[name]
        table = tables.get(str(name).lower())
        if table is None:
            raise ValueError(f"partition names table {name!r}, which is not a relation")
        if table.name not in read:
            raise ValueError(f"partition names table {name!r}, which the query does not read")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("column"), str):
            raise ValueError(f"partition of {name!r} must give 'column'")
        unknown = set(spec) - {"column", "boundaries", "ranges", "domain", "sample", "histogram"}
        if unknown:
            raise ValueError(f"partition of {name!r}: unknown keys {sorted(unknown)}")
        pos = table.position(spec["column"])
        if pos is None:
            raise ValueError(f"partition of {name!r}: no column {spec['column']!r}")
        if "boundaries" in spec:
            if "ranges" in spec:
                raise ValueError(f"partition of {name!r}: give boundaries or ranges, not both")
            bounds = [_number(b, f"partition of {name!r}") for b in spec["boundaries"]]
            if len({type(b) is str for b in bounds}) > 1:
                raise ValueError(f"partition of {name!r}: boundaries mix numbers and strings")
            if any(a >= b for a, b in pairwise(bounds)):
                raise ValueError(f"partition of {name!r}: boundaries must be strictly increasing")
        elif "ranges" in spec and ("sample" in spec or "histogram" in spec):
            if "domain" in spec or ("sample" in spec and "histogram" in spec):
                raise ValueError(f"partition of {name!r}: give one of domain, sample or histogram")
            weighted = _weighted(spec, str(name))
            bounds = equi_depth(spec["ranges"], weighted, str(name))
        elif "ranges" in spec:
            bounds = equi_width(spec["ranges"], spec.get("domain"), str(name))
        else:
            raise ValueError(f"partition of {name!r} must give boundaries or ranges")
        specs.append(RangeSpec(table.name, table.sql_columns[pos], pos, tuple(bounds), offset))
        offset += len(bounds) + 1
    return specs


def equi_width(ranges: Any, domain: Any, name: str) -> list[Any]:
    """n equal-width ranges over ``[lo, hi)``: the n - 1 inner boundaries (ints stay ints when exact)."""
    if isinstance(ranges, bool) or not isinstance(ranges, int) or ranges < 1:
        raise ValueError(f"partition of {name!r}: ranges must be an int >= 1")
    if (
        not isinstance(domain, list)
        or len(domain) != 2
        or not all(isinstance(d, int | float) and not isinstance(d, bool) for d in domain)
        or not domain[0] < domain[1]
    ):
        raise ValueError(f"partition of {name!r}: ranges needs domain: [lo, hi] with lo < hi (numbers)")
    lo, hi = Fraction(domain[0]), Fraction(domain[1])
    out: list[Any] = []
    for i in range(1, ranges):
        b = lo + (hi - lo) * i / ranges
        out.append(int(b) if b.denominator == 1 else float(b))
    if any(a >= b for a, b in pairwise(out)):
        raise ValueError(f"partition of {name!r}: {ranges} ranges do not fit in the domain {domain}")
    return out


def _weighted(spec: Mapping[str, Any], name: str) -> list[tuple[Any, int]]:
    """The sample as (value, count) pairs: each sample value counts once, a histogram bucket its count."""
    where = f"partition of {name!r}"
    if "sample" in spec:
        values = spec["sample"]
        if not isinstance(values, list | tuple) or not values:
            raise ValueError(f"{where}: sample must be a non-empty list of values")
        pairs = [(_number(v, where), 1) for v in values]
    else:
        buckets = spec["histogram"]
        if not isinstance(buckets, list | tuple) or not buckets:
            raise ValueError(f"{where}: histogram must be a non-empty list of [value, count]")
        pairs = []
        for b in buckets:
            if not isinstance(b, list | tuple) or len(b) != 2 or not isinstance(b[1], int) or b[1] < 0:
                raise ValueError(f"{where}: histogram entries must be [value, count >= 0], got {b!r}")
            pairs.append((_number(b[0], where), b[1]))
    if len({type(v) is str for v, _ in pairs}) > 1:
        raise ValueError(f"{where}: sample mixes numbers and strings")
    if not sum(c for _, c in pairs):
        raise ValueError(f"{where}: the histogram counts nothing")
    return pairs


def equi_depth(ranges: Any, weighted: list[tuple[Any, int]], name: str) -> list[Any]:
    """Cut points putting about the same share of the sample in each of n ranges (the artifact builds its
    partitions this way, from the table's quantiles). A value is never split: a value heavier than a
    range takes its cut points with it, so heavy hitters leave fewer, fuller fragments."""
    if isinstance(ranges, bool) or not isinstance(ranges, int) or ranges < 1:
        raise ValueError(f"partition of {name!r}: ranges must be an int >= 1")
    counts: dict[Any, int] = {}
    for v, c in weighted:
        counts[v] = counts.get(v, 0) + c
    values = sorted(v for v, c in counts.items() if c)
    total = sum(counts.values())
    out: list[Any] = []
    seen, i = 0, 1
    for v in values:  # v starts a range when the share before it reaches the next i/n quantile
        if i < ranges and seen * ranges >= i * total and seen:
            out.append(v)
            while i < ranges and seen * ranges >= i * total:
                i += 1
        seen += counts[v]
    return out
