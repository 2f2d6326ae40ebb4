"""Build the fivm demo sample (services/fivm/data/housing.jsonl) from the F-IVM authors' Housing files.

    python bench/fivm_housing_sample.py --source DIR [--out FILE] [--postcodes N] [--seed S]

``DIR`` holds the authors' scale-1 Housing tables (``House.tbl`` ... ``Transport.tbl``: headerless,
``|``-separated, one row per postcode, values normalised to [0, 1]). The output is deterministic for
given arguments. What it does (services/fivm/data/README.md):

* keeps every ``stride``-th postcode, ``N`` of them, and gives each a ``region`` (the partition key:
  one independent query instance per region);
* writes every value rounded to four decimals (half to even, from its exact decimal text), the precision
  the demo query computes in exactly (its ``decimals: 4``), and ``postcode`` as its index;
* emits the static relations (Demographics, Transport) first, then the other four per postcode, then
  churn: deletes of some tuples, followed by re-inserts, some unchanged and some with one value taken
  from another postcode's row (an update is a delete plus an insert).
"""

from __future__ import annotations

import argparse
import random
import sys
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from ivmstream.services.fivm.service import HOUSING  # noqa: E402

STATIC = ("Demographics", "Transport")
UPDATABLE = ("House", "Shop", "Institution", "Restaurant")
REGIONS = ("north", "east", "south")
DECIMALS = Decimal("0.0001")  # the demo config's decimals: 4
POSTCODE_STEPS = 24_999  # postcodes are k / 24999 for k = 0..24999 in the authors' files

Row = dict[str, Any]


def rounded(text: str) -> float:
    """A value rounded to four decimals, half to even, from its exact decimal text."""
    return float(Decimal(text).quantize(DECIMALS, rounding=ROUND_HALF_EVEN))


def read_table(path: Path, columns: tuple[str, ...]) -> dict[int, Row]:
    """One table by postcode index, every other value rounded."""
    rows: dict[int, Row] = {}
    for line in path.read_text().splitlines():
        fields = line.rstrip("|").split("|")
        if len(fields) != len(columns):
            raise ValueError(f"{path.name}: expected {len(columns)} fields, got {len(fields)}: {line!r}")
        postcode = round(float(fields[0]) * POSTCODE_STEPS)
        if postcode in rows:
            raise ValueError(f"{path.name}: postcode {fields[0]} appears twice")
        values = {c: rounded(v) for c, v in zip(columns[1:], fields[1:], strict=True)}
        rows[postcode] = {"postcode": postcode} | values
    return rows


def build(source: Path, postcodes: int, seed: int) -> list[dict[str, Any]]:
    tables = {name: read_table(source / f"{name}.tbl", cols) for name, cols in HOUSING.items()}
    common = sorted(set.intersection(*(set(t) for t in tables.values())))
    stride = max(1, len(common) // postcodes)
    chosen = common[::stride][:postcodes]
    region = {p: REGIONS[i % len(REGIONS)] for i, p in enumerate(chosen)}
    events: list[dict[str, Any]] = []

    def emit(rel: str, row: Row, delta: int) -> None:
        events.append({"relation": rel, "row": row | {"region": region[row["postcode"]]}, "delta": delta})

    for rel in STATIC:
        for p in chosen:
            emit(rel, tables[rel][p], 1)
    for p in chosen:
        for rel in UPDATABLE:
            emit(rel, tables[rel][p], 1)

    rng = random.Random(seed)
    churned = sorted(rng.sample(chosen, len(chosen) // 5))
    reinserts: list[tuple[str, Row]] = []
    for p in churned:
        rel = rng.choice(UPDATABLE)
        old = tables[rel][p]
        emit(rel, old, -1)
        fate = rng.random()
        if fate < 0.4:
            reinserts.append((rel, old))  # deleted, then the same tuple comes back
        elif fate < 0.8:
            column = rng.choice(HOUSING[rel][1:])
            donor = tables[rel][rng.choice(common)]
            reinserts.append((rel, old | {column: donor[column]}))  # an update: one value changes
        # else: it stays deleted (for House: the postcode leaves the join)
    for rel, row in reinserts:
        emit(rel, row, 1)
    return events


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--source", type=Path, required=True, help="folder with the authors' Housing .tbl files")
    ap.add_argument("--out", type=Path, default=REPO / "services" / "fivm" / "data" / "housing.jsonl")
    ap.add_argument("--postcodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    events = build(args.source, args.postcodes, args.seed)
    args.out.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in events))
    print(f"{args.out}: {len(events)} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
