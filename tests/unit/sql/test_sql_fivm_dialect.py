"""F-IVM's dialect (IMPORT DTREE, CREATE TYPE, ring lifts) on the Housing data, against DuckDB."""

from __future__ import annotations

import duckdb
import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import ROOT, duckdb_rows, same_rows

FIVM = ROOT.parent / "fivm"
JOIN = " NATURAL JOIN ".join(["house", "shop", "institution", "restaurant", "demographics", "transport"])


def _duck(script: object) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for table in script.tables.values():  # type: ignore[attr-defined]
        cols = ", ".join(f"'{c}': 'DOUBLE'" for c in table.columns)
        path = FIVM / table.source.path
        con.execute(
            f"CREATE TABLE {table.name} AS SELECT {', '.join(table.columns)} FROM "
            f"read_csv('{path}', delim='|', header=false, columns={{{cols}}}, null_padding=true)"
        )
    return con


def test_cofactor_lifts_are_the_covariance_ring_over_the_natural_join() -> None:
    script = load_script(FIVM / "housing_regression.sql")
    (plan,) = plan_script(script)
    assert (plan.service, plan.plan["ring"], plan.plan["variable_order_source"]) == (
        "fivm",
        "covariance",
        "imported (IMPORT DTREE)",
    )
    ((value,),) = replay_script(script, [plan], InputChoice({}, base=FIVM))[0]["rows"]
    con = _duck(script)
    names = value["variables"]
    assert len(names) == 26
    count = con.execute(f"SELECT COUNT(*) FROM {JOIN}").fetchone()[0]
    assert value["count"] == count
    for i in (0, 5, 25):
        for j in (0, 13, 25):
            a, b = names[i], names[j]
            s, sp = con.execute(f"SELECT SUM({a}), SUM({a} * {b}) FROM {JOIN}").fetchone()
            assert value["sum"][i] == pytest.approx(s) and value["sumprod"][i][j] == pytest.approx(sp)


def test_a_grouped_sum_over_the_housing_join_equals_duckdb() -> None:
    choice = InputChoice({}, base=FIVM)
    script = load_script(FIVM / "housing_sum.sql")
    (result,) = replay_script(script, plan_script(script), choice)
    assert result["service"] == "fivm" and result["columns"] == ["house", "total", "n"]
    assert same_rows(result["rows"], duckdb_rows(script, script.views[0], choice))
