"""Workloads for the F-IVM benchmarks: the Housing-like database and the streams (Retailer, over its real
dimension tables: ``bench/fivm_retailer.py``).

docs/fivm/algorithm.md describes the queries; this module only makes data, deterministically from a
seed, so every strategy of one run sees the same stream.

* **Housing** (a star on ``postcode``, 6 relations, 27 variables). At scale s Demographics, Transport
  and House keep one row per postcode and Shop, Institution and Restaurant hold
  ``max(1, floor(0.9·s + 0.5))`` rows per postcode, so s = 1 has 6 rows per postcode and the listing of
  the join grows with the cube of that fan-out while its factorized form grows linearly. (The seed's
  generator is not published; this rule reproduces its two reported facts: 150,000 tuples at s = 1 over
  25,000 postcodes and about 1.4M at s = 20.) Values are uniform in [0, 1), like the authors' normalised
  scale-1 files; ``postcode`` is the postcode's index.
* **Streams**: the seed's insert-only round-robin interleaving (relations in increasing size, each
  contributes one batch per round until it runs out), optionally followed by deletes of a fraction of
  the inserted tuples in the same interleaving.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ivmstream.services.fivm.service import HOUSING as HOUSING_SCHEMA  # the authors' column order

Row = dict[str, Any]

HOUSING: dict[str, list[str]] = {name: list(cols) for name, cols in HOUSING_SCHEMA.items()}
HOUSING_GROWING = ("Shop", "Institution", "Restaurant")


def housing_fanout(scale: int) -> int:
    """Rows per postcode of the growing relations at scale ``scale``."""
    return max(1, int(0.9 * scale + 0.5))


def housing(scale: int, postcodes: int = 25_000, seed: int = 0) -> dict[str, list[Row]]:
    """A Housing-like database at ``scale`` (see the module docstring)."""
    rng = random.Random(seed)
    fan = housing_fanout(scale)
    out: dict[str, list[Row]] = {name: [] for name in HOUSING}
    for p in range(postcodes):
        for name, columns in HOUSING.items():
            for _ in range(fan if name in HOUSING_GROWING else 1):
                row: Row = {"postcode": float(p)}
                for c in columns[1:]:
                    row[c] = round(rng.random(), 6)
                out[name].append(row)
    return out


def housing_config(ring: str, features: Sequence[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A fivm service config over the Housing relations (all columns float)."""
    config: dict[str, Any] = {"relations": {name: list(cols) for name, cols in HOUSING.items()}, "ring": ring}
    if features is not None:
        config["features"] = list(features)
    config.update(extra)
    return config


def round_robin(
    database: Mapping[str, Sequence[Row]], batch: int, delete_fraction: float = 0.0, seed: int = 0
) -> Iterator[tuple[str, list[Row], int]]:
    """``(relation, rows, delta)`` batches: the seed's insert-only interleaving (relations by increasing
    size, one batch each per round), then, if asked, deletes of ``delete_fraction`` of every relation's
    rows in the same interleaving."""
    order = sorted(database, key=lambda r: (len(database[r]), r))
    yield from _interleave({r: database[r] for r in order}, batch, 1)
    if delete_fraction > 0:
        rng = random.Random(seed)
        doomed = {r: rng.sample(list(database[r]), int(len(database[r]) * delete_fraction)) for r in order}
        yield from _interleave(doomed, batch, -1)


def _interleave(
    tables: Mapping[str, Sequence[Row]], batch: int, delta: int
) -> Iterator[tuple[str, list[Row], int]]:
    cursors = dict.fromkeys(tables, 0)
    while cursors:
        for name in list(cursors):
            start = cursors[name]
            rows = list(tables[name][start : start + batch])
            if rows:
                yield name, rows, delta
            if start + batch >= len(tables[name]):
                del cursors[name]
            else:
                cursors[name] = start + batch
