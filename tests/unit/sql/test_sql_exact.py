"""fivm views over exact columns are exact: with every aggregate factor a DECIMAL(p, s), integer or
decimal literal, the compiled view runs fivm's exact rings (``decimals``), so its results are the
floats nearest DuckDB's DECIMAL answers, bit for bit, and a group whose rows are all deleted leaves."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import duckdb

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script

SQL = """
CREATE STREAM r (k INT, g INT, price DECIMAL(10, 2), qty INT)
  FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE STREAM s (k INT, rate DECIMAL(6, 3))
  FROM FILE 's.csv' LINE DELIMITED CSV (delimiter := '|');
SELECT r.g, SUM(r.price * r.qty * (1 - s.rate)) AS v, SUM(r.price) AS p, COUNT(*) AS n
FROM r, s WHERE r.k = s.k GROUP BY r.g;
"""


def _data(tmp: Path) -> list[tuple[int, int, Decimal, int]]:
    """r's change stream (every row of group 3 deleted again) and s; the live rows of r."""
    rng = random.Random(5)
    live: list[tuple[int, int, Decimal, int]] = []
    lines = []
    for i in range(400):
        if live and rng.random() < 0.3:
            row = live.pop(rng.randrange(len(live)))
            flag = 0
        else:
            row = (
                rng.randrange(6),
                rng.randrange(4),
                Decimal(rng.randrange(1, 2000)) / 100,
                rng.randrange(1, 9),
            )
            live.append(row)
            flag = 1
        lines.append(f"{i}|{flag}|{row[0]}|{row[1]}|{row[2]}|{row[3]}")
    for j, row in enumerate([r for r in live if r[1] == 3]):
        live.remove(row)
        lines.append(f"{400 + j}|0|{row[0]}|{row[1]}|{row[2]}|{row[3]}")
    (tmp / "r.csv").write_text("\n".join(lines) + "\n")
    (tmp / "s.csv").write_text("".join(f"{k}|{Decimal(rng.randrange(0, 300)) / 1000}\n" for k in range(6)))
    return live


def test_exact_columns_give_exact_results(tmp_path: Path) -> None:
    live = _data(tmp_path)
    path = tmp_path / "q.sql"
    path.write_text(SQL)
    script = load_script(path)
    (plan,) = plan_script(script)
    assert plan.plan["decimals"] == 3  # a factor's most decimals: (1 - s.rate)
    (result,) = replay_script(script, [plan], InputChoice({}, base=tmp_path))
    con = duckdb.connect()
    con.execute("CREATE TABLE r (k INT, g INT, price DECIMAL(10, 2), qty INT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", live)
    con.execute(
        f"CREATE TABLE s AS SELECT * FROM read_csv('{tmp_path / 's.csv'}', delim='|', "
        "columns={'k': 'INT', 'rate': 'DECIMAL(6, 3)'})"
    )
    expected = con.execute(
        "SELECT r.g, SUM(r.price * r.qty * (1 - s.rate)), SUM(r.price), COUNT(*) FROM r, s WHERE r.k = s.k "
        "GROUP BY r.g ORDER BY r.g"
    ).fetchall()
    assert 3 not in {row[0] for row in result["rows"]}  # every row of group 3 deleted: the group left
    assert sorted(result["rows"]) == [[g, float(v), float(p), n] for g, v, p, n in expected]
