"""DBToaster's TPC-H queries, as it ships them, replayed through the services and checked against DuckDB
on the tiny data set and its deletion stream (the standard sets in a slow test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import ROOT, SHARED, dbtoaster_cwd, duckdb_rows, same_rows

FIVM_QUERIES = ["query1", "query3", "query5", "query6", "query10", "query12", "query14"]


def _check(tmp_path: Path, query: str, dataset: str, data: Path | None = None) -> str:
    sql = ROOT / "tpch" / f"{query}.sql"
    with dbtoaster_cwd(tmp_path, *(() if data is None else (data,))):
        script = load_script(sql)
        plans = plan_script(script)
        choice = InputChoice({}, dataset)
        (result,) = replay_script(script, plans, choice)
        expected = duckdb_rows(script, script.views[0], choice)
    assert result["columns"] == plans[0].columns
    assert same_rows(result["rows"], expected), (result["rows"][:5], expected[:5])
    return str(result["service"])


@pytest.mark.parametrize("dataset", ["tiny", "tiny_del"])
@pytest.mark.parametrize("query", FIVM_QUERIES)
def test_fivm_class_queries_equal_duckdb(tmp_path: Path, query: str, dataset: str) -> None:
    assert _check(tmp_path, query, dataset) == "fivm"


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "tpch" / "standard").is_dir(), reason="shared DBToaster data absent")
@pytest.mark.parametrize("dataset", ["standard", "standard_del"])
@pytest.mark.parametrize("query", FIVM_QUERIES)
def test_fivm_class_queries_on_standard(tmp_path: Path, query: str, dataset: str) -> None:
    assert _check(tmp_path, query, dataset, SHARED) == "fivm"
