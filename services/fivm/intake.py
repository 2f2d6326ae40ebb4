"""Event intake: typed, canonical tuples and batch consolidation (docs/fivm/algorithm.md §1.2, §2.12).

Each event names a relation, carries every column of it and a non-zero integer multiplicity change.
Values are made canonical once, here, so that join keys compare by exact equality: floats are finite
and ``-0.0`` becomes ``0.0``; ints given for float columns become floats; ints must fit int64 (state
stores and Spark keep int64 keys). NULL never joins (natural-join semantics), so an event with a NULL
value is refused rather than stored. Deletes of absent tuples are *not* refused: relations are
Z-relations and a negative multiplicity is legal (§2.12).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from ivmstream.sdk import EventColumns, Rejection, RelationColumns, UpdateEvent
from ivmstream.services.fivm import kernels
from ivmstream.services.fivm.factorized_updates import Factor, FactorizedDelta, product_places
from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.views import Key

_FLOAT_ONLY = {float}


def _columns_getter(names: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """``row -> tuple(row[c] for c in names)`` as one ``itemgetter`` call."""
    get = operator.itemgetter(*names)
    if len(names) == 1:
        return lambda row: (get(row),)
    return get  # type: ignore[no-any-return]


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_INF = math.inf

# An event for relation ``R + FACTORIZED_SUFFIX`` carries a product delta of R (docs/fivm/algorithm.md
# §2.13): row ``{"factors": [{"columns": [...], "entries": [[[v, ...], x], ...]}, ...]}``, the list
# itself or its JSON text (a string column passes any typed event codec). Relation names are
# identifiers, so the suffix never names a relation.
FACTORIZED_SUFFIX = ":factorized"


def events_of(batch: EventColumns) -> list[UpdateEvent]:
    """A batch given as columns as the events it holds, in batch order (for the per-event checks)."""
    out: list[Any] = [None] * batch.size
    for rel, part in batch.relations.items():
        names = list(part.columns)
        rows = zip(*part.columns.values(), strict=True) if names else [()] * len(part)
        for at, delta, values in zip(part.positions, part.deltas, rows, strict=True):
            out[at] = UpdateEvent(rel, dict(zip(names, values, strict=True)), delta)
    return out


class Intake:
    def __init__(self, query: Query) -> None:
        self.columns: dict[str, tuple[tuple[str, str], ...]] = {
            r.name: tuple(zip(r.columns, r.types, strict=True)) for r in query.relations
        }
        self.aliases = {o.name: o.base for o in query.occurrences if o.is_alias}
        self.query = query
        # relations whose columns are all floats: one pass checks a whole row (the common case)
        self.all_float: dict[str, tuple[str, ...]] = {
            r.name: r.columns for r in query.relations if all(t == "float" for t in r.types)
        }
        # ... and one C call that reads those columns of a row as a tuple
        self.float_columns: dict[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]] = {
            rel: _columns_getter(names) for rel, names in self.all_float.items()
        }

    def parse(self, i: int, ev: UpdateEvent) -> tuple[str, Key, int] | FactorizedDelta | Rejection:
        """(relation, canonical tuple in column order, multiplicity), a product delta, or why the event
        is refused."""
        rel = ev.relation
        cols = self.columns.get(rel)
        if cols is None:
            if rel.endswith(FACTORIZED_SUFFIX) and rel[: -len(FACTORIZED_SUFFIX)] in self.columns:
                return self.parse_factorized(i, ev)
            base = self.aliases.get(rel)
            hint = f"; {rel!r} is an alias of {base!r}, send {base!r} events" if base else ""
            return Rejection(i, "unknown-relation", f"no relation {rel!r}{hint}")
        m = ev.delta
        if m.__class__ is not int:
            return Rejection(i, "bad-delta", f"delta must be a non-zero integer, got {m!r}")
        if not m:
            return Rejection(i, "zero-delta", "delta must be a non-zero integer, got 0")
        row = ev.row
        getter = self.float_columns.get(rel)
        if getter is not None and len(row) == len(cols):
            try:
                floats = getter(row)
            except KeyError:
                pass  # the checks below say which column is missing
            else:
                # Only floats, and their sum finite: each is (NaN and ±inf make the sum non-finite; a
                # sum that overflows falls to the checks below, which accept it).
                if set(map(type, floats)) == _FLOAT_ONLY and -_INF < sum(floats) < _INF:
                    if 0.0 in floats:  # -0.0 == 0.0: one encoding of zero
                        return rel, tuple([v + 0.0 for v in floats]), m
                    return rel, floats, m
        if len(row) != len(cols):
            extra = [c for c in row if c not in dict(cols)]
            if extra:
                return Rejection(i, "unexpected-column", f"{rel} has no column(s) {extra}")
        values: list[Any] = []
        for col, typ in cols:
            try:
                v = row[col]
            except KeyError:
                return Rejection(i, "missing-column", f"{rel}.{col} is missing")
            # The common case inline (a finite float for a float column); canonical() decides the rest.
            if v.__class__ is float and typ == "float" and -_INF < v < _INF:
                values.append(v + 0.0)
                continue
            cv = canonical(v, typ)
            if cv.__class__ is Refused:
                return Rejection(i, cv.code, f"{rel}.{col}: {cv.detail}")
            values.append(cv)
        return rel, tuple(values), m

    def absorb_floats(
        self, events: Sequence[UpdateEvent], start: int, rel: str, batch: dict[Key, int]
    ) -> int:
        """Add the tuples of ``events[start:]`` to ``batch`` while they are ``rel``'s (an all-float
        relation) and ``parse`` would accept them as they come; return the index of the first event
        left (to ``parse``, which then says what is wrong with it). The per-event call is a large share
        of a batch, so the common case runs here in one loop."""
        getter = self.float_columns[rel]
        width = len(self.columns[rel])
        end = kernels.absorb_run(events, start, rel, self.all_float[rel], batch)
        if end > start:
            return end
        i = start
        n = len(events)
        while i < n:
            ev = events[i]
            if ev.relation != rel:
                break
            m = ev.delta
            row = ev.row
            if m.__class__ is not int or not m or len(row) != width:
                break
            try:
                floats = getter(row)
            except KeyError:
                break
            if set(map(type, floats)) != _FLOAT_ONLY or not -_INF < sum(floats) < _INF:
                break
            if 0.0 in floats:  # -0.0 == 0.0: one encoding of zero
                floats = tuple([v + 0.0 for v in floats])
            batch[floats] = batch.get(floats, 0) + m
            i += 1
        return i

    def absorb_columns(self, relations: Mapping[str, RelationColumns]) -> dict[str, dict[Key, int]] | None:
        """A batch given as columns, each relation's tuples summed in batch order (as ``absorb_floats``
        sums the events), when every row is an all-float relation's that ``parse`` accepts as it comes:
        its declared columns, finite floats, a non-zero int delta. None when any row is not (the caller
        then applies the batch as events, whose checks say what is wrong)."""
        out: dict[str, dict[Key, int]] = {}
        for rel, part in relations.items():
            names = self.all_float.get(rel)
            given = part.columns
            if names is None or len(given) != len(names):
                return None
            try:
                columns = [given[c] for c in names]
            except KeyError:
                return None
            counted = kernels.absorb_columns(columns, part.deltas)
            if counted is None:
                return None
            out[rel] = counted
        return out

    def parse_factorized(self, i: int, ev: UpdateEvent) -> FactorizedDelta | Rejection:
        """An event of ``R:factorized``: ``delta`` copies of the product its row's factors spell."""
        base = ev.relation[: -len(FACTORIZED_SUFFIX)]
        m = ev.delta
        if m.__class__ is not int or not m:
            return Rejection(i, "bad-delta", f"delta must be a non-zero integer, got {m!r}")
        row = ev.row
        if set(row) != {"factors"}:
            return Rejection(
                i, "bad-factors", f"a {FACTORIZED_SUFFIX} row has one field, factors; got {sorted(row)}"
            )
        spec = row["factors"]
        if isinstance(spec, str):
            try:
                spec = orjson.loads(spec)
            except orjson.JSONDecodeError as exc:
                return Rejection(i, "bad-factors", f"factors is not valid JSON: {exc}")
        shape = "factors must be a list of {columns: [...], entries: [[[value, ...], number], ...]}"
        if not isinstance(spec, list) or not all(
            isinstance(f, Mapping) and set(f) == {"columns", "entries"} and isinstance(f["entries"], list)
            for f in spec
        ):
            return Rejection(i, "bad-factors", shape)
        factors: list[tuple[Any, list[tuple[Any, Any]]]] = []
        for f in spec:
            entries = f["entries"]
            if not all(
                isinstance(e, list | tuple) and len(e) == 2 and isinstance(e[0], list) for e in entries
            ):
                return Rejection(i, "bad-factors", shape)
            factors.append((f["columns"], [(tuple(k), x) for k, x in entries]))
        out = self.check_factors(base, factors, m)
        return Rejection(i, out.code, out.detail) if isinstance(out, Refused) else out

    def check_factors(
        self, relation: str, factors: Sequence[tuple[Any, Iterable[tuple[Any, Any]]]], copies: int = 1
    ) -> FactorizedDelta | Refused:
        """Validate a product delta of ``relation``: ``(columns, [(key, number), ...])`` per factor.

        The factors' columns must be disjoint and cover the relation's columns except its weight column;
        keys are made canonical like event values; numbers are multiplicities (ints), or weights for a
        weighted relation (numbers of its weight column's type). Equal keys add up, zeros are dropped;
        the delta is ``copies`` times the product."""
        cols = self.columns.get(relation)
        if cols is None:
            return Refused("unknown-relation", f"no relation {relation!r} (aliases follow their relation)")
        weight = self.query.weight_of(relation)
        types = dict(cols)
        wanted = [c for c, _ in cols if c != weight]
        if not isinstance(factors, list | tuple) or not factors:
            return Refused("bad-factors", "a product delta needs at least one factor")
        seen: list[str] = []
        out: list[Factor] = []
        for spec, entries in factors:
            columns = (spec,) if isinstance(spec, str) else spec
            if not isinstance(columns, list | tuple) or any(c not in wanted for c in columns):
                return Refused(
                    "factor-columns", f"factor columns {spec!r} must be columns of {relation} among {wanted}"
                )
            seen.extend(columns)
            data: dict[Key, Any] = {}
            for key, x in entries:
                k = key if isinstance(key, tuple) else (key,)
                if len(k) != len(columns):
                    return Refused(
                        "bad-factors", f"key {key!r} does not match factor columns {list(columns)}"
                    )
                values = []
                for c, v in zip(columns, k, strict=True):
                    cv = canonical(v, types[c])
                    if cv.__class__ is Refused:
                        return Refused(cv.code, f"{relation}.{c}: {cv.detail}")
                    values.append(cv)
                bad = _factor_value(x, None if weight is None else types[weight])
                if bad:
                    return Refused("factor-value", f"{relation} factor {list(columns)}: {bad}")
                t = tuple(values)
                data[t] = data.get(t, 0) + x
            out.append(Factor(tuple(columns), data))
        if sorted(seen) != sorted(wanted):
            return Refused(
                "factor-columns", f"factor columns {seen} must split {relation}'s columns {wanted} disjointly"
            )
        out = [Factor(f.columns, {k: x for k, x in f.entries.items() if x}) for f in out]
        delta = FactorizedDelta(relation, tuple(out), copies)
        decimals = self.query.decimals
        if weight is not None and decimals is not None and types[weight] == "float":
            need = product_places(delta)
            if need > decimals:
                return Refused(
                    "factor-precision",
                    f"the product of the factors spells {need} decimals, more than decimals = {decimals}",
                )
        return delta


def _factor_value(x: Any, weight_type: str | None) -> str:
    """Why ``x`` cannot be a factor value ('' when it can): ints for multiplicities and int weights,
    finite numbers for float weights."""
    if x.__class__ is int:
        return "" if INT64_MIN <= x <= INT64_MAX else f"{x} is outside int64"
    if weight_type == "float" and x.__class__ is float:
        return "" if math.isfinite(x) else f"{x!r} is not a finite number"
    wanted = "a number" if weight_type == "float" else "an integer"
    return f"expected {wanted}, got {x!r}"


class Refused:
    """Why a value cannot be stored (a Rejection without the event index)."""

    __slots__ = ("code", "detail")

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail


def canonical(v: Any, typ: str) -> Any:
    """The canonical value of ``v`` for a column of type ``typ``, or ``Refused``."""
    cls = v.__class__
    if v is None:
        return Refused("null-value", "NULL never joins; the event is refused")
    if typ == "str":
        return v if cls is str else Refused("wrong-type", f"expected a string, got {v!r}")
    if typ == "int":
        if cls is not int:
            return Refused("wrong-type", f"expected an integer, got {v!r}")
        if not INT64_MIN <= v <= INT64_MAX:
            return Refused("int-out-of-range", f"{v} is outside int64")
        return v
    if cls is int:
        if not INT64_MIN <= v <= INT64_MAX:
            return Refused("int-out-of-range", f"{v} is outside int64")
        return float(v)
    if cls is not float:
        return Refused("wrong-type", f"expected a number, got {v!r}")
    if not math.isfinite(v):
        return Refused("non-finite-number", f"{v!r} is not a finite number")
    return v + 0.0  # -0.0 + 0.0 == +0.0: one encoding per value


def consolidate(batch: dict[Key, int]) -> dict[Key, int]:
    """Drop tuples whose changes cancelled (§1.2: duplicates and insert/delete pairs net out first);
    ``batch`` itself when none did."""
    return {t: m for t, m in batch.items() if m} if 0 in batch.values() else batch
