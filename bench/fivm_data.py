"""Workloads for the F-IVM benchmarks: Housing-like and Retailer-like databases, matrices, streams.

docs/fivm/algorithm.md describes the queries; this module only makes data, deterministically from a
seed, so every strategy of one run sees the same stream.

* **Housing** (a star on ``postcode``, 6 relations, 27 variables). At scale s Demographics, Transport
  and House keep one row per postcode and Shop, Institution and Restaurant hold
  ``max(1, floor(0.9·s + 0.5))`` rows per postcode, so s = 1 has 6 rows per postcode and the listing of
  the join grows with the cube of that fan-out while its factorized form grows linearly. (The seed's
  generator is not published; this rule reproduces its two reported facts: 150,000 tuples at s = 1 over
  25,000 postcodes and about 1.4M at s = 20.) Values are uniform in [0, 1), like the authors' normalised
  scale-1 files; ``postcode`` is the postcode's index.
* **Retailer** (a snowflake: Inventory ⋈ Location on locn ⋈ Census on zip, ⋈ Item on ksn, ⋈ Weather on
  (locn, dateid)): L locations with one zip each, D dates, K items, Weather one row per (locn, dateid),
  Inventory triples with a Zipf-skewed ksn. Small ints and doubles.
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

RETAILER: dict[str, list[str]] = {
    "Inventory": ["locn", "dateid", "ksn", "inventoryunits"],
    "Location": ["locn", "zip", "rgn_cd", "clim_zn_nbr", "tot_area_sq_ft", "sell_area_sq_ft", "avghhi"],
    "Census": ["zip", "population", "white", "asian", "pacific", "blackafrican", "medianage"],
    "Item": ["ksn", "subcategory", "category", "categoryCluster", "prize"],
    "Weather": ["locn", "dateid", "rain", "snow", "maxtemp", "mintemp", "meanwind", "thunder"],
}
RETAILER_INT = {"locn", "dateid", "ksn", "zip", "inventoryunits", "rain", "snow", "thunder"}


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


def retailer(
    locations: int = 100,
    dates: int = 100,
    items: int = 1_000,
    inventory: int = 100_000,
    zipf: float = 1.1,
    seed: int = 0,
) -> dict[str, list[Row]]:
    """A Retailer-like snowflake with the real schema's join structure and cardinality ratios."""
    rng = random.Random(seed)
    out: dict[str, list[Row]] = {name: [] for name in RETAILER}
    zips = list(range(locations))
    rng.shuffle(zips)
    for locn in range(locations):
        out["Location"].append(
            {"locn": locn, "zip": zips[locn]}
            | {c: round(rng.random() * 100, 3) for c in RETAILER["Location"][2:]}
        )
    for z in range(locations):
        out["Census"].append({"zip": z} | {c: round(rng.random() * 100, 3) for c in RETAILER["Census"][1:]})
    for ksn in range(items):
        out["Item"].append({"ksn": ksn} | {c: round(rng.random() * 10, 3) for c in RETAILER["Item"][1:]})
    for locn in range(locations):
        for d in range(dates):
            row: Row = {"locn": locn, "dateid": d}
            for c in RETAILER["Weather"][2:]:
                row[c] = rng.randrange(2) if c in RETAILER_INT else round(rng.random() * 30, 2)
            out["Weather"].append(row)
    weights = [1.0 / (k + 1) ** zipf for k in range(items)]
    seen: set[tuple[int, int, int]] = set()
    ksns = rng.choices(range(items), weights=weights, k=inventory * 2)
    i = 0
    while len(out["Inventory"]) < inventory and i < len(ksns):
        key = (rng.randrange(locations), rng.randrange(dates), ksns[i])
        i += 1
        if key in seen:
            continue
        seen.add(key)
        out["Inventory"].append(
            {"locn": key[0], "dateid": key[1], "ksn": key[2], "inventoryunits": rng.randrange(1, 50)}
        )
    return out


def retailer_config(ring: str, **extra: Any) -> dict[str, Any]:
    relations = {
        name: [c if c not in RETAILER_INT else {c: "int"} for c in cols] for name, cols in RETAILER.items()
    }
    return {"relations": relations, "ring": ring} | extra


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
