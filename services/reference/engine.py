"""The platform's reference engine: bag multiplicities, per-column sums and a bag fingerprint.

Small on purpose, yet as sensitive to delivery mistakes as the real engines: a replayed or lost
update changes the counts, the sums and the fingerprint (a sum of per-tuple hashes weighted by
multiplicity, so it depends only on the bag, which lets a Spark bootstrap build the same state).
The platform's exactly-once tests, the Spark framework tests and the demo use it.

Its state is checkpointed incrementally: the bag (one entry per distinct tuple, map ``bag``) and its
running aggregates (one small entry, map ``s``), so ``result()`` never scans the bag. With the option
``resident_entries: N`` the bag is read through the state store with at most N tuples cached
(``ivmstream.backed_map``): a key's bag may then be larger than the worker's memory.
"""

from __future__ import annotations

import decimal
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from functools import partial, reduce
from itertools import repeat
from operator import add, methodcaller, mul, sub
from typing import Any, Literal

import orjson

from ivmstream.sdk import (
    Entry,
    EntryChange,
    EventColumns,
    Rejection,
    RelationColumns,
    StoreBackedMap,
    StoredMap,
    UpdateEvent,
    json_bytes,
    relation_columns,
)

from .bag_rows import KERNEL_TYPES, bag_rows, decimal_flags

_NUMERIC = frozenset(("int", "float", "number", "decimal"))


def kernel_precision() -> int:
    """The decimal context's precision for ``bag_rows``, or 0 (no decimal left to the kernel) unless the
    context rounds, prints and bounds exponents as the default one does (what its canonical text assumes)."""
    ctx = decimal.getcontext()
    default_like = (
        ctx.rounding == decimal.ROUND_HALF_EVEN
        and ctx.capitals == 1
        and ctx.clamp == 0
        and ctx.Emax >= 999_999
        and ctx.Emin <= -999_999
    )
    return ctx.prec if default_like else 0


_MOD = 2**128
BAG = "bag"  # map of tuples: orjson [relation, [values]] -> multiplicity
SCALARS = "s"  # map of the running aggregates: one entry
_AGGREGATES = b"aggregates"


def _canonical(value: Any) -> str:
    """Equal decimals hash equally ("1.50" and "1.5", "-0" and "0"), as they are equal bag members."""
    if isinstance(value, Decimal):
        return str((value + 0).normalize())
    raise TypeError(f"cannot hash {type(value).__name__}")


def decimal_text(value: Decimal) -> str:
    """One text per value ("3.00" and "3.0" both read "3"), however the sum was accumulated."""
    return format((value + 0).normalize(), "f")


def _float_member(v: float) -> float:
    return 0.0 if v == 0 else v  # -0.0 == 0.0


def _number_member(v: int | float) -> int | float:
    return int(v) if type(v) is float and v.is_integer() else v  # 1.0 == 1


def _exact_member(v: int | Decimal) -> int | Decimal:
    return int(v) if type(v) is Decimal and v == v.to_integral_value() else v  # Decimal("2.0") == 2


# Values of a column type that compare equal in Python but print differently are one bag member: each
# is written in one form (decimals by ``_canonical``). The other types print one way per value.
_MEMBER_FORM: dict[str, Callable[[Any], Any]] = {
    "float": _float_member,
    "number": _number_member,
    "exact": _exact_member,
}


def _read_value(v: Any, typ: str) -> Any:
    """A value of a column of type ``typ`` as a snapshot or a member key holds it (decimals as text)."""
    if typ == "decimal" or (typ == "exact" and isinstance(v, str)):
        return Decimal(v)
    return v


def member_hash(member: bytes) -> int:
    """A 128-bit hash of one tuple of a relation, given as its member key."""
    return int.from_bytes(hashlib.blake2b(member, digest_size=16).digest(), "big")


_blake2b_128 = partial(hashlib.blake2b, digest_size=16)
_digest = methodcaller("digest")
_ZERO = Decimal(0)
_BIG: Literal["big"] = "big"
_COPY = b"%b".__mod__  # json_bytes: each key in a bytes object of its own size


def py_member_hashes(members: Sequence[bytes]) -> list[int]:
    """``member_hash`` of each member key, through hashlib (the reference of ``_kernels.member_hashes``)."""
    return list(map(int.from_bytes, map(_digest, map(_blake2b_128, members)), repeat(_BIG)))


try:  # the compiled kernels (services/reference/_kernels.c), built by setup.py where a C compiler is present
    from ._kernels import member_hashes as compiled_member_hashes
    from ._kernels import member_keys as compiled_member_keys
except ImportError:  # pragma: no cover - a machine without a C compiler
    compiled_member_hashes = None  # type: ignore[assignment]
    compiled_member_keys = None  # type: ignore[assignment]

# Set IVMSTREAM_PURE_PYTHON=1 to hash through hashlib even where the kernel is built.
member_hashes: Callable[[Sequence[bytes]], list[int]] = (
    compiled_member_hashes
    if compiled_member_hashes is not None and os.environ.get("IVMSTREAM_PURE_PYTHON", "") != "1"
    else py_member_hashes
)


_encode_mult: Callable[[int], bytes] = b"%d".__mod__  # str(m).encode(), in C


class BagEngine:
    # Its columnar entry takes a decimal written as a plain decimal string as that string
    # (ColumnarEngine): the batch update reads it without a Decimal; the other paths make one.
    decimal_text = True

    def __init__(
        self,
        relations: Mapping[str, Mapping[str, str]],
        allow_negative: bool = False,
        resident_entries: int | None = None,
    ) -> None:
        """``resident_entries``: keep the bag in the state store with at most this many tuples cached
        (None: the whole bag stays in memory)."""
        self.types = {r: dict(cols) for r, cols in relations.items()}
        self.allow_negative = allow_negative
        self.resident_entries = resident_entries
        forms = {r: [_MEMBER_FORM.get(t) for t in cols.values()] for r, cols in self.types.items()}
        self._forms: dict[str, list[Callable[[Any], Any]] | None] = {
            r: [f or _same for f in fs] if any(fs) else None for r, fs in forms.items()
        }
        self.bag: StoreBackedMap[int] = StoreBackedMap(BAG, _encode_mult, int, resident_entries)
        self.sums: dict[str, dict[str, Any]] = {
            r: {c: (Decimal(0) if t == "decimal" else 0) for c, t in cols.items() if t in _NUMERIC}
            for r, cols in relations.items()
        }
        # Per relation, what ``bag_rows`` takes: its columns, their decimal flags and the summed columns'
        # indexes (None: a column type the kernel does not write, or no columns).
        self._row_kernel: dict[str, tuple[list[str], bytes, list[int]] | None] = {
            r: (
                (
                    list(cols),
                    decimal_flags(list(cols.values())),
                    [i for i, t in enumerate(cols.values()) if t in _NUMERIC],
                )
                if cols and all(t in KERNEL_TYPES for t in cols.values())
                else None
            )
            for r, cols in self.types.items()
        }
        self.counts: dict[str, int] = {r: 0 for r in relations}
        self.distinct: dict[str, int] = {r: 0 for r in relations}  # tuples of nonzero multiplicity
        self.fingerprint = 0
        self.applied = 0
        self._aggregates_changed = False

    @classmethod
    def from_bags(
        cls,
        relations: Mapping[str, Mapping[str, str]],
        allow_negative: bool,
        bags: Mapping[str, Mapping[tuple, int]],
    ) -> BagEngine:
        """The state reached by inserting each tuple of ``bags`` with its multiplicity (Spark bootstrap)."""
        engine = cls(relations, allow_negative)
        for rel, bag in bags.items():
            for tup, mult in bag.items():
                refused = engine.apply([UpdateEvent(rel, dict(zip(relations[rel], tup, strict=True)), mult)])
                if refused:
                    raise ValueError(
                        f"cannot bootstrap {rel}{tup!r} with multiplicity {mult}: {refused[0].detail}"
                    )
        engine.applied = 0
        return engine

    def member(self, relation: str, values: Sequence[Any]) -> bytes:
        """The bag's entry key of a tuple: equal tuples (by the column types' equality) give equal bytes."""
        forms = self._forms[relation]
        if forms is not None:
            values = [f(v) for f, v in zip(forms, values, strict=True)]
        return json_bytes([relation, list(values)], default=_canonical)

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejected: list[Rejection] = []
        bag, member = self.bag, self.member
        for i, ev in enumerate(events):
            rel = ev.relation
            values = tuple(ev.row.values())
            key = member(rel, values)
            old = bag.get(key) or 0
            new = old + ev.delta
            if new < 0 and not self.allow_negative:
                rejected.append(
                    Rejection(
                        i,
                        "absent-tuple",
                        f"delete of {-ev.delta} copies of {values!r} from {rel} which holds {old}",
                    )
                )
                continue
            if new == 0:
                if old:
                    bag.delete(key)
                    self.distinct[rel] -= 1
            else:
                bag.put(key, new)
                if not old:
                    self.distinct[rel] += 1
            self.counts[rel] += ev.delta
            sums = self.sums[rel]
            for col in sums:
                sums[col] += ev.row[col] * ev.delta
            self.fingerprint = (self.fingerprint + ev.delta * member_hash(key)) % _MOD
            self.applied += 1
            self._aggregates_changed = True
        return rejected

    def apply_columns(self, batch: EventColumns) -> list[Rejection]:
        """``apply`` of a batch given as columns (``ColumnarEngine``): member keys and their hashes are
        made a column at a time, each distinct member is read and written once, and the column sums
        are accumulated over whole columns. The state, result and checkpoint entries equal ``apply``'s:
        the fingerprint is a sum, each column's sum is accumulated in event order, and each member's
        bag entry ends as its last event leaves it."""
        rejected: list[Rejection] = []
        for rel, part in batch.relations.items():
            rejected += self._apply_relation(rel, part)
        if len(batch.relations) > 1:
            rejected.sort()  # in batch order, as ``apply`` returns them
        return rejected

    def _apply_relation(self, rel: str, part: RelationColumns) -> list[Rejection]:
        if self._row_kernel[rel] is not None and (dicts := self.bag.resident_dicts()) is not None:
            refused = self._apply_rows(rel, part, *dicts)
            if refused is not None:
                return refused
        part = RelationColumns(part.positions, part.deltas, self._decimals(rel, part.columns))
        keys = self.member_keys(rel, part.columns, len(part))
        deltas = part.deltas
        bag = self.bag
        rejected: list[Rejection] = []
        if self.allow_negative or min(deltas) > 0:  # nothing can be refused
            if min(deltas) == max(deltas) == 1:
                nets: dict[bytes, int] = Counter(keys)
            else:
                nets = {}
                for key, delta in zip(keys, deltas, strict=True):
                    nets[key] = nets.get(key, 0) + delta
            touched = list(nets)
            before = [m or 0 for m in bag.get_many(touched)]
            after = list(map(add, before, nets.values()))
            kept, columns = deltas, part.columns
        else:  # in event order: a delete may find fewer copies than it takes
            old_of: dict[bytes, int] = {}
            new_of: dict[bytes, int] = {}
            keep: list[int] = []
            for i, (key, delta) in enumerate(zip(keys, deltas, strict=True)):
                old = new_of.get(key)
                if old is None:
                    old = old_of.get(key)
                    if old is None:
                        old = old_of[key] = bag.get(key) or 0
                new = old + delta
                if new < 0:
                    values = tuple(part.columns[c][i] for c in self.types[rel])
                    detail = f"delete of {-delta} copies of {values!r} from {rel} which holds {old}"
                    rejected.append(Rejection(part.positions[i], "absent-tuple", detail))
                    continue
                new_of[key] = new
                keep.append(i)
            if not keep:
                return rejected
            touched = list(new_of)
            before = [old_of[k] for k in touched]
            after = list(new_of.values())
            if len(keep) == len(deltas):
                kept, columns = deltas, part.columns
            else:
                kept = [deltas[i] for i in keep]
                columns = {c: [values[i] for i in keep] for c, values in part.columns.items()}
        if 0 in after:
            for key, new in zip(touched, after, strict=True):
                if new == 0:
                    bag.delete(key)
                else:
                    bag.put(key, new)
        else:
            bag.put_many(zip(touched, after, strict=True))
        self.distinct[rel] += len(after) - after.count(0) - (len(before) - before.count(0))
        moved = map(sub, after, before)
        self.fingerprint = (self.fingerprint + sum(map(mul, moved, member_hashes(touched)))) % _MOD
        self.counts[rel] += sum(kept)
        sums, types = self.sums[rel], self.types[rel]
        ones = min(kept) == max(kept) == 1
        for col in sums:
            if ones and types[col] == "int":  # int sums are exact in any order
                sums[col] = sum(columns[col], sums[col])
            else:
                sums[col] = reduce(add, map(mul, columns[col], kept), sums[col])  # in event order, as apply
        self.applied += len(kept)
        self._aggregates_changed = True
        return rejected

    def _apply_rows(
        self, rel: str, part: RelationColumns, dirty: dict[bytes, int | None], clean: dict[bytes, int | None]
    ) -> list[Rejection] | None:
        """``_apply_relation`` in one pass per row (``bag_rows``), the bag resident; None: left to it."""
        kernel = self._row_kernel[rel]
        assert kernel is not None
        names, flags, summed = kernel
        columns = [c if type(c) is list else list(c) for c in map(part.columns.__getitem__, names)]
        deltas = part.deltas if type(part.deltas) is list else list(part.deltas)
        sums = self.sums[rel]
        out = bag_rows(
            rel,
            columns,
            flags,
            deltas,
            dirty,
            clean,
            self.allow_negative,
            summed,
            list(sums.values()),
            kernel_precision(),
            Decimal,
        )
        if out is None:
            return None
        refused, applied, total, distinct, fingerprint, new_sums = out
        self.bag.hits += len(deltas)
        self.distinct[rel] += distinct
        self.counts[rel] += total
        self.fingerprint = (self.fingerprint + fingerprint) % _MOD
        sums.update(zip(sums, new_sums, strict=True))
        self.applied += applied
        self._aggregates_changed |= applied > 0
        rejected = []
        types = self.types[rel].values()
        for i, old in refused:
            values = tuple(
                _as_decimal(c[i]) if t == "decimal" else c[i] for c, t in zip(columns, types, strict=True)
            )
            detail = f"delete of {-deltas[i]} copies of {values!r} from {rel} which holds {old}"
            rejected.append(Rejection(part.positions[i], "absent-tuple", detail))
        return rejected

    def _decimals(self, rel: str, columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """``columns`` with a decimal column's plain decimal strings (``decimal_text``) as Decimals."""
        types = self.types[rel]
        return {
            c: list(map(_as_decimal, values)) if types[c] == "decimal" else values
            for c, values in columns.items()
        }

    def member_keys(self, rel: str, columns: Mapping[str, Sequence[Any]], rows: int) -> list[bytes]:
        """``member`` of each of the ``rows`` rows of ``columns``, made a column at a time (same bytes)."""
        if not self.types[rel]:  # a relation without columns has one tuple
            return [self.member(rel, ())] * rows
        forms: list[list[Any]] = []
        for col, typ in self.types[rel].items():
            values: Sequence[Any] = columns[col]
            if typ == "decimal":  # _canonical, over the column
                values = list(map(str, map(Decimal.normalize, map(add, values, repeat(_ZERO)))))
            elif typ == "exact":
                values = [_canonical(v) if type(v) is Decimal else v for v in map(_exact_member, values)]
            elif typ in _MEMBER_FORM:
                values = list(map(_MEMBER_FORM[typ], values))
            forms.append(values if type(values) is list else list(values))
        if compiled_member_keys is not None and member_hashes is not py_member_hashes:
            keys = compiled_member_keys(rel, forms)  # None: a value left to orjson (a float, a decimal)
            if keys is not None:
                return keys
        members = zip(repeat(rel), zip(*forms, strict=True))  # orjson writes tuples as arrays
        return list(map(_COPY, map(orjson.dumps, members)))

    def result(self) -> dict[str, Any]:
        return {
            "count": sum(self.counts.values()),
            "relations": {
                r: {
                    "count": self.counts[r],
                    "distinct": self.distinct[r],
                    "sums": {
                        c: (decimal_text(s) if isinstance(s, Decimal) else s) for c, s in self.sums[r].items()
                    },
                }
                for r in self.types
            },
            "fingerprint": f"{self.fingerprint:032x}",
        }

    def stats(self) -> dict[str, float]:
        bag = self.bag
        return {
            "tuples": float(sum(self.distinct.values())),
            "applied": float(self.applied),
            "resident_tuples": float(bag.resident),
            "bag_cache_hits": float(bag.hits),
            "bag_cache_misses": float(bag.misses),
            "bag_cache_evictions": float(bag.evictions),
        }

    # --- the bag in the state store (ivmstream.engine.StoreBackedEngine) ---------------------------------

    def store_backed_maps(self) -> Collection[str]:
        return (BAG,) if self.resident_entries is not None else ()

    def attach_stored_maps(self, maps: Mapping[str, StoredMap]) -> None:
        if BAG in maps:
            self.bag.attach(maps[BAG])

    # --- incremental checkpoints (ivmstream.engine.IncrementalEngine) ------------------------------------

    def changed_entries(self) -> list[EntryChange]:
        out = self.bag.changes()
        if self._aggregates_changed:
            out.append((SCALARS, _AGGREGATES, self._aggregates()))
            self._aggregates_changed = False
        return out

    def all_entries(self) -> Iterator[Entry]:
        yield from self.bag.entries()
        yield SCALARS, _AGGREGATES, self._aggregates()

    def restore_entries(self, entries: Iterable[Entry]) -> None:
        bag: list[tuple[bytes, bytes]] = []
        for map_name, key, value in entries:
            if map_name == BAG:
                bag.append((key, value))
            elif map_name == SCALARS and key == _AGGREGATES:
                self._restore_aggregates(orjson.loads(value))
            else:
                raise ValueError(f"unknown reference state entry {map_name}/{key!r}")
        self.bag.load(bag)
        self._aggregates_changed = False

    def _aggregates(self) -> bytes:
        return orjson.dumps(
            {
                "sums": {r: {c: str(s) for c, s in s_.items()} for r, s_ in self.sums.items()},
                "counts": self.counts,
                "distinct": self.distinct,
                "fingerprint": str(self.fingerprint),
                "applied": self.applied,
            }
        )

    def _restore_aggregates(self, agg: Mapping[str, Any]) -> None:
        for r, sums in agg["sums"].items():
            self.sums[r] = {c: _typed_sum(s, self.types[r][c]) for c, s in sums.items()}
        self.counts = dict(agg["counts"])
        if "distinct" in agg:
            self.distinct = dict(agg["distinct"])
        self.fingerprint = int(agg["fingerprint"])
        self.applied = agg["applied"]

    # --- whole snapshots (every tuple, in member-key order) -------------------------------------------

    def tuples(self) -> Iterator[tuple[str, tuple, int]]:
        """Every ``(relation, tuple, multiplicity)`` of the bag, in member-key order (reads the whole bag)."""
        for key, m in sorted(self.bag.items()):
            rel, values = orjson.loads(key)
            types = self.types[rel].values()
            yield rel, tuple(_read_value(v, t) for v, t in zip(values, types, strict=True)), m

    def snapshot(self) -> bytes:
        bags: dict[str, list[list[Any]]] = {r: [] for r in self.types}
        for rel, tup, m in self.tuples():
            bags[rel].append([list(tup), m])
        return orjson.dumps(
            {
                "bags": bags,
                "sums": {r: {c: str(s) for c, s in s_.items()} for r, s_ in self.sums.items()},
                "counts": self.counts,
                "fingerprint": str(self.fingerprint),
                "applied": self.applied,
            },
            default=str,
        )

    def restore(self, data: bytes) -> None:
        snap = orjson.loads(data)
        members: dict[bytes, int] = {}
        distinct = dict.fromkeys(self.types, 0)
        for r, rows in snap["bags"].items():
            types = list(self.types[r].values())
            for row, m in rows:
                members[self.member(r, [_read_value(v, t) for v, t in zip(row, types, strict=True)])] = m
                distinct[r] += 1
        self.bag.replace(members.items())
        self._restore_aggregates({**snap, "distinct": distinct})
        self._aggregates_changed = True


def _as_decimal(v: Any) -> Any:
    return Decimal(v) if type(v) is str else v


def _same(v: Any) -> Any:
    return v


def _typed_sum(s: str, typ: str) -> Any:
    if typ == "decimal":
        return Decimal(s)
    if typ == "int":
        return int(s)
    if typ == "float":
        return float(s)
    return int(s) if s.lstrip("-").isdigit() else float(s)


def make_engine(options: Mapping[str, Any]) -> BagEngine:
    """The service's engine factory: an empty engine for complete, validated options."""
    return BagEngine(
        relation_columns(options["relations"]), options["allow_negative"], options["resident_entries"]
    )
