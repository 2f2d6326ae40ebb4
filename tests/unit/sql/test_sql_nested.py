"""DBToaster's nested-aggregate queries (finance VWAP, price spread, missed trades; TPC-H Q17, Q18) route
to vwap's RPAI plans and agree with DuckDB (every SUM read as DBToaster's: empty is 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, SHARED, dbtoaster_cwd, duckdb_book_rows, duckdb_rows, same_rows

FINANCE = {"vwap": "vwap", "pricespread": "psp", "missedtrades": "mst"}


def _run(tmp: Path, sql: Path, dataset: str, data: Path) -> tuple[dict, object, object]:
    with dbtoaster_cwd(tmp, data):
        script = load_script(sql)
        plans = plan_script(script)
        (result,) = replay_script(script, plans, InputChoice({}, dataset))
    return result, script, plans[0]


@pytest.mark.parametrize("name", sorted(FINANCE))
def test_finance_queries_route_to_rpai_and_equal_duckdb(tmp_path: Path, name: str) -> None:
    result, script, plan = _run(tmp_path, ROOT / "finance" / f"{name}.sql", "tiny", DATA)
    assert result["service"] == "vwap"
    assert plan.plan["rpai_plan"] == FINANCE[name]
    expected = duckdb_book_rows(script.views[0], DATA / "finance" / "tiny" / "finance.csv")
    assert same_rows(result["rows"], expected), (result["rows"], expected)


@pytest.mark.parametrize("dataset", ["tiny", "tiny_del"])
@pytest.mark.parametrize("query", ["query17", "query18"])
def test_tpch_nested_queries_equal_duckdb(tmp_path: Path, query: str, dataset: str) -> None:
    result, script, _plan = _run(tmp_path, ROOT / "tpch" / f"{query}.sql", dataset, DATA)
    assert result["service"] == "vwap"
    with dbtoaster_cwd(tmp_path, DATA):
        expected = duckdb_rows(script, script.views[0], InputChoice({}, dataset))
    assert same_rows(result["rows"], expected), (result["rows"][:5], expected[:5])


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "finance" / "standard").is_dir(), reason="shared DBToaster data absent")
@pytest.mark.parametrize("name", sorted(FINANCE))
def test_finance_queries_on_standard(tmp_path: Path, name: str) -> None:
    result, script, _plan = _run(tmp_path, ROOT / "finance" / f"{name}.sql", "standard", SHARED)
    expected = duckdb_book_rows(script.views[0], SHARED / "finance" / "standard" / "finance.csv")
    assert same_rows(result["rows"], expected)
