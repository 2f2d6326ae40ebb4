"""IMP's UPDATEPS form: the query's provenance sketch maintained by the sketches service under a
delete, an update and an insert applied after the data; the answer equals DuckDB after the same DML and
the sketch holds exactly the fragments of the live rows."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
import sqlglot

from ivmstream.sql import SqlError, load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd, duckdb_rows, same_rows

SQL = ROOT / "tpch" / "updateps_q1.sql"
DML = [
    "DELETE FROM lineitem WHERE orderkey < 100",
    "UPDATE lineitem SET quantity = quantity + 1 WHERE returnflag = 'R'",
    "INSERT INTO lineitem VALUES (9999, 1, 1, 1, 5, 100.00, 0.05, 0.01, 'A', 'F', DATE '1995-01-01', "
    "DATE '1995-01-01', DATE '1995-01-01', 'NONE', 'AIR', 'x')",
]


@pytest.mark.parametrize("dataset", ["tiny", "tiny_del"])
def test_updateps_maintains_the_sketch_under_the_dml(tmp_path: Path, dataset: str) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        script = load_script(SQL)
        (plan,) = plan_script(script)
        assert [d.kind for d in plan.view.updates] == ["delete", "update", "insert"]
        (result,) = replay_script(script, [plan], InputChoice({}, dataset))
        expected = duckdb_rows(script, plan.view, InputChoice({}, dataset), DML)
        keys = duckdb_rows(
            script,
            plan.view.__class__(
                "keys", sqlglot.parse_one("SELECT orderkey FROM lineitem"), plan.view.statement, "imp"
            ),
            InputChoice({}, dataset),
            DML,
        )
    assert result["service"] == "sketches" and same_rows(result["rows"], expected), (result["rows"], expected)
    bounds = plan.view.provenance["boundaries"]  # type: ignore[index]
    assert result["sketch"]["lineitem"] == sorted({bisect.bisect_right(bounds, k) for (k,) in keys})
    assert bisect.bisect_right(bounds, 50) not in result["sketch"]["lineitem"]  # every row below 100 deleted


@pytest.mark.parametrize(
    ("dml", "message"),
    [
        ("DELETE FROM nosuch", "unknown table 'nosuch'"),
        ("UPDATE lineitem SET nosuch = 1", "unknown column 'nosuch'"),
        ("UPDATE lineitem SET quantity = 'x'", "type mismatch"),
        ("INSERT INTO lineitem VALUES (1, 2)", "a row of 2 values for 16 columns"),
        ("SELECT 1", "is not an update"),
    ],
)
def test_updateps_statements_are_checked_in_one_line(tmp_path: Path, dml: str, message: str) -> None:
    path = tmp_path / "bad.sql"
    (tmp_path / "schemas.sql").write_text((ROOT / "tpch" / "schemas.sql").read_text())
    text = SQL.read_text()
    start = text.index("\nUPDATEPS (") + len("\nUPDATEPS (")
    end = text.index("PROVENANCE WITH") - 1
    path.write_text(text[:start] + dml + ")\n" + text[end + 1 :])
    with dbtoaster_cwd(tmp_path, DATA), pytest.raises(SqlError) as info:
        load_script(path)
    assert message in str(info.value) and "\n" not in str(info.value) and str(path) in str(info.value)
