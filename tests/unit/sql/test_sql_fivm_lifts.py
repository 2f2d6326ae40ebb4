"""F-IVM's relational and factorized lifts (``RingRelational``, ``RingFactorized``) compiled to fivm's
listing and factorized rings over a natural join, against DuckDB: the listing is the join projected on
the lifted variables with multiplicities; the factorized result holds the join's size and, per value of
its root variable, the number of join tuples with it."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script

SCHEMA = """
CREATE STREAM R (a INT, b INT) FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := '|');
CREATE STREAM S (a INT, c INT) FROM FILE 's.csv' LINE DELIMITED CSV (delimiter := '|');
CREATE TABLE T (c INT, d INT) FROM FILE 't.csv' LINE DELIMITED CSV (delimiter := '|');
CREATE TYPE {ring} FROM FILE 'ring/{header}.hpp';
SELECT SUM([lift<0>: {ring}<0, int>](b) * [lift<1>: {ring}<1, int>](d)) AS joined
FROM R NATURAL JOIN S NATURAL JOIN T;
"""
JOIN = "SELECT * FROM r NATURAL JOIN s NATURAL JOIN t"


def _database(tmp: Path) -> duckdb.DuckDBPyConnection:
    rng = random.Random(3)
    con = duckdb.connect()
    for name, cols in (("r", "a, b"), ("s", "a, c"), ("t", "c, d")):
        rows = [(rng.randrange(6), rng.randrange(5)) for _ in range(40)]
        (tmp / f"{name}.csv").write_text("".join(f"{x}|{y}\n" for x, y in rows))
        con.execute(f"CREATE TABLE {name} ({cols.replace(',', ' INT,')} INT)")
        con.executemany(f"INSERT INTO {name} VALUES (?, ?)", rows)
    return con


def _replay(tmp: Path, ring: str, header: str) -> tuple[dict, object]:
    path = tmp / f"{ring}.sql"
    path.write_text(SCHEMA.format(ring=ring, header=header))
    script = load_script(path)
    (plan,) = plan_script(script)
    (result,) = replay_script(script, [plan], InputChoice({}, base=tmp))
    return result, plan


def test_relational_lifts_list_the_join_on_the_lifted_variables(tmp_path: Path) -> None:
    con = _database(tmp_path)
    result, plan = _replay(tmp_path, "RingRelational", "ring_relational")
    assert (plan.plan["ring"], plan.plan["static"]) == ("listing", ["t"])  # type: ignore[attr-defined]
    ((value,),) = result["rows"]
    expected = con.execute(f"SELECT COUNT(*) FROM ({JOIN})").fetchone()[0]
    assert value["join_size"] == expected > 0
    columns = value["columns"]
    got = {tuple(row[:-1]): row[-1] for row in value["rows"]}
    want = {
        tuple(r[:-1]): r[-1]
        for r in con.execute(f"SELECT {', '.join(columns)}, COUNT(*) FROM ({JOIN}) GROUP BY ALL").fetchall()
    }
    assert got == want


@pytest.mark.parametrize("header", ["ring_factorized", "ring_factorized_degree2"])
def test_factorized_lifts_count_the_join_per_root_value(tmp_path: Path, header: str) -> None:
    con = _database(tmp_path)
    result, plan = _replay(tmp_path, "RingFactorized", header)
    assert plan.plan["ring"] == "factorized"  # type: ignore[attr-defined]
    ((value,),) = result["rows"]
    assert value["join_size"] == con.execute(f"SELECT COUNT(*) FROM ({JOIN})").fetchone()[0]
    var = value["variable"]
    want = dict(con.execute(f"SELECT {var}, COUNT(*) FROM ({JOIN}) GROUP BY {var}").fetchall())
    assert {v: n for v, n in value["values"]} == want
