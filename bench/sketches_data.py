"""Inputs of the sketches service's demo and benchmarks, derived deterministically from TPC-H samples.

``demo``: the bundled workload ``services/sketches/data/tpch_demo.jsonl`` — the DBToaster ``tiny``
TPC-H sample (customer, orders, lineitem) split into two independent databases by order key parity
(key field ``db``), loaded, then a stream of lineitem deletes and re-inserts:

    python -m bench.sketches_data demo --tpch <DBToaster data>/tpch/tiny
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from ivmstream.events.tpch import parse_tpch_line

DEMO_OUT = Path(__file__).resolve().parents[1] / "services" / "sketches" / "data" / "tpch_demo.jsonl"


def read_table(folder: Path, table: str) -> list[dict[str, Any]]:
    """Rows of ``<table>.csv`` or ``<table>.tbl``; a clear error when the sample is absent."""
    for suffix in (".csv", ".tbl"):
        path = folder / f"{table}{suffix}"
        if path.exists():
            return [parse_tpch_line(table, line) for line in path.read_text().splitlines() if line.strip()]
    raise SystemExit(f"no {table}.csv or {table}.tbl in {folder} (a TPC-H sample is needed)")


def _event(table: str, row: dict[str, Any], delta: int, db: str) -> bytes:
    return orjson.dumps({"relation": table, "row": {**row, "db": db}, "delta": delta})


def demo_events(folder: Path, seed: int = 3) -> list[bytes]:
    rng = random.Random(seed)
    customers = read_table(folder, "customer")
    orders = read_table(folder, "orders")
    lineitems = read_table(folder, "lineitem")
    out: list[bytes] = []
    for db, parity in (("even", 0), ("odd", 1)):
        for c in customers:
            out.append(_event("customer", c, 1, db))
        for o in orders:
            if o["orderkey"] % 2 == parity:
                out.append(_event("orders", o, 1, db))
    mine = {db: [li for li in lineitems if li["orderkey"] % 2 == p] for db, p in (("even", 0), ("odd", 1))}
    for db, rows in mine.items():
        for li in rows:
            out.append(_event("lineitem", li, 1, db))
    deleted: dict[str, list[dict[str, Any]]] = {db: [] for db in mine}
    for _ in range(160):  # deletes and re-inserts of lineitems: groups leave and re-enter the top-k
        db = rng.choice(sorted(mine))
        if deleted[db] and rng.random() < 0.4:
            li = deleted[db].pop(rng.randrange(len(deleted[db])))
            out.append(_event("lineitem", li, 1, db))
        else:
            li = mine[db][rng.randrange(len(mine[db]))]
            if li in deleted[db]:
                continue
            deleted[db].append(li)
            out.append(_event("lineitem", li, -1, db))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["demo"])
    ap.add_argument("--tpch", type=Path, required=True, help="folder with the TPC-H sample tables")
    ap.add_argument("--out", type=Path, default=DEMO_OUT)
    args = ap.parse_args(argv)
    args.out.write_bytes(b"\n".join(demo_events(args.tpch)) + b"\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
