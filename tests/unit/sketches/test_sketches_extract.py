"""EXTRACT(YEAR FROM d) over dates held as ISO text (TPC-H Q7 and Q9 group by it): the maintained sketch
equals a fresh capture and DuckDB's capture of the SQL rewrite after every batch of inserts and deletes."""

from __future__ import annotations

import random

import duckdb
import sqlglot

from bench.sketches_db import options
from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.capture_sql import FRAG, branches, capture_sql
from ivmstream.services.sketches.engine import SketchEngine
from ivmstream.services.sketches.expressions import year

QUERY = (
    "SELECT EXTRACT(YEAR FROM d) AS y, SUM(x) AS s FROM t WHERE EXTRACT(YEAR FROM d) >= 1993 "
    "GROUP BY EXTRACT(YEAR FROM d) HAVING SUM(x) > 40"
)


def _duck_sketch(engine: SketchEngine, rows: dict[tuple, int]) -> int:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE __p_t (id BIGINT, d VARCHAR, x BIGINT, {FRAG} BIGINT)")
    spec = engine.specs["t"]
    flat = [(*r, spec.offset + spec.fragment(r[1])) for r, n in rows.items() for _ in range(n)]
    if flat:
        con.executemany("INSERT INTO __p_t VALUES (?, ?, ?, ?)", flat)
    out = 0
    for b in branches(sqlglot.parse_one(QUERY)):  # type: ignore[arg-type]
        for row in con.execute(capture_sql(b, {"t": ["id", "d", "x"]}, "duckdb")).fetchall():
            for v in row:
                if v is not None and v >= 0:
                    out |= 1 << int(v)
    return out


def test_year_of_text_and_of_null() -> None:
    assert year("1995-03-15") == 1995 and year(None) is None


def test_extract_year_sketch_equals_capture_and_duckdb_after_each_batch() -> None:
    rng = random.Random(5)
    partition = {"t": {"column": "d", "boundaries": ["1993-01-01", "1995-01-01", "1997-01-01"]}}
    engine = SketchEngine(
        options(QUERY, {"t": {"id": "int", "d": "str", "x": "int"}}, partition, monotone_aggregates=True)
    )
    live: dict[tuple, int] = {}
    for step in range(12):
        batch: dict[tuple, int] = {}
        for _ in range(rng.randint(1, 8)):
            if live and rng.random() < 0.4:
                row = rng.choice(sorted(live))
                if batch.get(row, 0) + live[row] > 0:
                    batch[row] = batch.get(row, 0) - 1
            else:
                row = (
                    step * 100 + rng.randint(0, 99),
                    f"{rng.randint(1991, 1998)}-0{rng.randint(1, 9)}-15",
                    rng.randint(0, 20),
                )
                batch[row] = batch.get(row, 0) + 1
        batch = {r: n for r, n in batch.items() if n}
        engine.maintain({"t": batch})
        for r, n in batch.items():
            live[r] = live.get(r, 0) + n
            if not live[r]:
                del live[r]
        want = P.capture_sketch(engine.compiled.root, engine.view(None))
        assert engine.sketch() == want == _duck_sketch(engine, live)
    assert want  # some year passes HAVING: the comparison is not of empty sketches
