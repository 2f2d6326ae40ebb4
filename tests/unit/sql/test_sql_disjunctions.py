"""A disjunction of per-relation conditions across a join (TPC-H Q19's form) compiled for fivm by
inclusion-exclusion over per-relation indicators, against DuckDB on random tables whose disjuncts
overlap, with the join condition shared by every disjunct factored out."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import coalesced, same_rows

SCHEMA = """
CREATE STREAM l (k INT, q INT, price DOUBLE, mode VARCHAR(5))
  FROM FILE 'l.csv' LINE DELIMITED CSV (delimiter := '|');
CREATE TABLE p (k INT, brand VARCHAR(5), size INT) FROM FILE 'p.csv' LINE DELIMITED CSV (delimiter := '|');
"""
VIEWS = [
    "SELECT SUM(l.price * (1 - 0.1 * l.q)) AS revenue, COUNT(*) AS n FROM l, p WHERE "
    "(l.k = p.k AND p.brand = 'b1' AND l.q BETWEEN 1 AND 5 AND p.size < 4) OR "
    "(p.k = l.k AND p.brand IN ('b1', 'b2') AND l.q >= 3 AND l.mode = 'AIR') OR "
    "(l.k = p.k AND p.size >= 2 AND l.mode IN ('AIR', 'SHIP'))",
    "SELECT SUM(l.price) AS s FROM l, p WHERE l.k = p.k AND (p.brand = 'b2' OR l.q > 4)",
]


def _tables(tmp: Path) -> duckdb.DuckDBPyConnection:
    rng = random.Random(11)
    con = duckdb.connect()
    con.execute("CREATE TABLE l (k BIGINT, q BIGINT, price DOUBLE, mode VARCHAR)")
    con.execute("CREATE TABLE p (k BIGINT, brand VARCHAR, size BIGINT)")
    ls = [
        (
            rng.randrange(8),
            rng.randrange(8),
            rng.randrange(100, 999) / 10,
            rng.choice(["AIR", "SHIP", "RAIL"]),
        )
        for _ in range(120)
    ]
    ps = [(k, rng.choice(["b1", "b2", "b3"]), rng.randrange(6)) for k in range(8) for _ in range(2)]
    (tmp / "l.csv").write_text("".join("|".join(map(str, r)) + "\n" for r in ls))
    (tmp / "p.csv").write_text("".join("|".join(map(str, r)) + "\n" for r in ps))
    con.executemany("INSERT INTO l VALUES (?, ?, ?, ?)", ls)
    con.executemany("INSERT INTO p VALUES (?, ?, ?)", ps)
    return con


@pytest.mark.parametrize("view", VIEWS)
def test_a_disjunction_across_relations_equals_duckdb(tmp_path: Path, view: str) -> None:
    con = _tables(tmp_path)
    path = tmp_path / "q.sql"
    path.write_text(SCHEMA + view + ";\n")
    script = load_script(path)
    (plan,) = plan_script(script)
    assert plan.service == "fivm"
    (result,) = replay_script(script, [plan], InputChoice({}, base=tmp_path))
    expected = [list(r) for r in con.execute(coalesced(script.views[0].select)).fetchall()]
    assert same_rows(result["rows"], expected), (result["rows"], expected)
    assert any(v for v in expected[0])


def test_a_disjunction_with_group_by_runs_first_order_and_equals_duckdb(tmp_path: Path) -> None:
    # inclusion-exclusion does not group; the first-order plan evaluates the predicate on each delta
    con = _tables(tmp_path)
    path = tmp_path / "q.sql"
    path.write_text(
        SCHEMA + "SELECT p.brand, SUM(l.price) FROM l, p WHERE l.k = p.k AND (p.size = 1 OR l.q = 2) "
        "GROUP BY p.brand;\n"
    )
    script = load_script(path)
    (plan,) = plan_script(script)
    assert plan.service == "firstorder"
    (result,) = replay_script(script, [plan], InputChoice({}, base=tmp_path))
    expected = [list(r) for r in con.execute(coalesced(script.views[0].select)).fetchall()]
    assert expected and same_rows(result["rows"], expected), (result["rows"], expected)
