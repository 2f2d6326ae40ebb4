"""The platform's reference engine: bag multiplicities, per-column sums and a bag fingerprint.

Small on purpose, yet as sensitive to delivery mistakes as the real engines: a replayed or lost
update changes the counts, the sums and the fingerprint (a sum of per-tuple hashes weighted by
multiplicity, so it depends only on the bag, which lets a Spark bootstrap build the same state).
The platform's exactly-once tests, the Spark framework tests and the demo use it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson

from shared.engine import Rejection
from shared.events import UpdateEvent

_NUMERIC = frozenset(("int", "float", "number", "decimal"))
_MOD = 2**128


def _canonical(value: Any) -> str:
    """Equal decimals hash equally ("1.50" and "1.5", "-0" and "0"), as they are equal bag members."""
    if isinstance(value, Decimal):
        return str((value + 0).normalize())
    raise TypeError(f"cannot hash {type(value).__name__}")


def decimal_text(value: Decimal) -> str:
    """One text per value ("3.00" and "3.0" both read "3"), however the sum was accumulated."""
    return format((value + 0).normalize(), "f")


def tuple_hash(relation: str, values: tuple) -> int:
    """A 128-bit hash of one tuple of a relation."""
    encoded = orjson.dumps([relation, list(values)], default=_canonical)
    return int.from_bytes(hashlib.blake2b(encoded, digest_size=16).digest(), "big")


class BagEngine:
    def __init__(self, relations: Mapping[str, Mapping[str, str]], allow_negative: bool = False) -> None:
        self.types = {r: dict(cols) for r, cols in relations.items()}
        self.allow_negative = allow_negative
        self.bags: dict[str, dict[tuple, int]] = {r: {} for r in relations}
        self.sums: dict[str, dict[str, Any]] = {
            r: {c: (Decimal(0) if t == "decimal" else 0) for c, t in cols.items() if t in _NUMERIC}
            for r, cols in relations.items()
        }
        self.counts: dict[str, int] = {r: 0 for r in relations}
        self.fingerprint = 0
        self.applied = 0

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

    def apply(self, events: Sequence[UpdateEvent]) -> list[Rejection]:
        rejected: list[Rejection] = []
        for i, ev in enumerate(events):
            bag = self.bags[ev.relation]
            tup = tuple(ev.row.values())
            new = bag.get(tup, 0) + ev.delta
            if new < 0 and not self.allow_negative:
                rejected.append(
                    Rejection(
                        i,
                        "absent-tuple",
                        f"delete of {-ev.delta} copies of {tup!r} "
                        f"from {ev.relation} which holds {bag.get(tup, 0)}",
                    )
                )
                continue
            if new == 0:
                del bag[tup]
            else:
                bag[tup] = new
            self.counts[ev.relation] += ev.delta
            sums = self.sums[ev.relation]
            for col in sums:
                sums[col] += ev.row[col] * ev.delta
            self.fingerprint = (self.fingerprint + ev.delta * tuple_hash(ev.relation, tup)) % _MOD
            self.applied += 1
        return rejected

    def result(self) -> dict[str, Any]:
        return {
            "count": sum(self.counts.values()),
            "relations": {
                r: {
                    "count": self.counts[r],
                    "distinct": len(self.bags[r]),
                    "sums": {
                        c: (decimal_text(s) if isinstance(s, Decimal) else s) for c, s in self.sums[r].items()
                    },
                }
                for r in self.bags
            },
            "fingerprint": f"{self.fingerprint:032x}",
        }

    def stats(self) -> dict[str, float]:
        return {"tuples": float(sum(len(b) for b in self.bags.values())), "applied": float(self.applied)}

    def snapshot(self) -> bytes:
        return orjson.dumps(
            {
                "bags": {r: [[list(t), m] for t, m in bag.items()] for r, bag in self.bags.items()},
                "sums": {r: {c: str(s) for c, s in s_.items()} for r, s_ in self.sums.items()},
                "counts": self.counts,
                "fingerprint": str(self.fingerprint),
                "applied": self.applied,
            },
            default=str,
        )

    def restore(self, data: bytes) -> None:
        snap = orjson.loads(data)
        for r, rows in snap["bags"].items():
            cols = list(self.types[r].values())
            self.bags[r] = {tuple(_typed(v, t) for v, t in zip(row, cols, strict=True)): m for row, m in rows}
        for r, sums in snap["sums"].items():
            self.sums[r] = {c: _typed_sum(s, self.types[r][c]) for c, s in sums.items()}
        self.counts = dict(snap["counts"])
        self.fingerprint = int(snap["fingerprint"])
        self.applied = snap["applied"]


def _typed(v: Any, typ: str) -> Any:
    return Decimal(v) if typ == "decimal" else v


def _typed_sum(s: str, typ: str) -> Any:
    if typ == "decimal":
        return Decimal(s)
    if typ == "int":
        return int(s)
    if typ == "float":
        return float(s)
    return int(s) if s.lstrip("-").isdigit() else float(s)
