"""Routing of the other classes (triangles, reservoir, sketches), explain's output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ivmstream.sql import SqlError, load_script
from ivmstream.sql.explain import explain_json, explain_text
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd, duckdb_rows, same_rows

EXAMPLES = ROOT.parent / "examples"


def _replay(path: Path, choice: InputChoice) -> tuple[list[dict], object]:
    script = load_script(path)
    plans = plan_script(script)
    return replay_script(script, plans, choice), script


def test_triangle_count_routes_to_ivm_eps_and_equals_duckdb() -> None:
    choice = InputChoice({}, base=EXAMPLES)
    (result,), script = _replay(EXAMPLES / "triangles.sql", choice)
    assert result["service"] == "triangles"
    assert same_rows(result["rows"], duckdb_rows(script, script.views[0], choice))
    assert result["rows"][0][0] > 0


def test_sample_of_a_join_routes_to_reservoir() -> None:
    choice = InputChoice({}, base=EXAMPLES)
    (result,), script = _replay(EXAMPLES / "sample.sql", choice)
    assert result["service"] == "reservoir"
    # k exceeds the join: the sample is the whole (filtered) join
    assert same_rows(result["rows"], duckdb_rows(script, script.views[0], choice))


def test_small_sample_is_a_subset_of_the_join(tmp_path: Path) -> None:
    sql = (EXAMPLES / "sample.sql").read_text().replace("1000000 ROWS", "5 ROWS")
    path = tmp_path / "sample.sql"
    path.write_text(sql)
    choice = InputChoice({}, base=EXAMPLES)
    (result,), script = _replay(path, choice)
    full = {tuple(r) for r in duckdb_rows(script, script.views[0], InputChoice({}, base=EXAMPLES))}
    assert len(result["rows"]) == 5 and {tuple(r) for r in result["rows"]} <= full


def test_provenance_statement_routes_to_sketches(tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        choice = InputChoice({}, "tiny")
        (result,), script = _replay(ROOT / "tpch" / "provenance_q1.sql", choice)
        expected = duckdb_rows(script, script.views[0], choice)
    assert result["service"] == "sketches" and "sketch" in result
    assert same_rows(result["rows"], expected)


def test_explain_json_names_service_strategy_why_plan_and_cost(tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        expected = {
            "tpch/query3.sql": ("fivm", "fivm"),
            "tpch/query17.sql": ("vwap", "rpai"),
            "finance/vwap.sql": ("vwap", "rpai"),
        }
        for rel, (service, strategy) in expected.items():
            plans = plan_script(load_script(ROOT / rel))
            (line,) = explain_json(plans)
            obj = json.loads(line)
            assert {"view", "service", "strategy", "why", "plan", "cost"} <= set(obj)
            assert (obj["service"], obj["strategy"]) == (service, strategy)
            assert explain_text(plans).startswith(f"view {obj['view']}: {service}")
    plans = plan_script(load_script(EXAMPLES / "triangles.sql"))
    assert json.loads(explain_json(plans)[0])["plan"]["epsilon"] == "1/2"


SCHEMA = "CREATE STREAM r (a INT, b VARCHAR(5)) FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := ',');\n"


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("SELECT SUM(a) FROM q;", "2:20", "unknown table 'q'"),
        ("SELECT SUM(r.z) FROM r;", "2:12", "unknown column 'z'"),
        ("SELECT SUM(a) FROM r WHERE b < 3;", "2:28", "type mismatch"),
        ("SELECT SUM(b) FROM r;", "2:12", "type mismatch"),
        ("SELECT a, SUM(b) OVER () FROM r;", "2:", "window functions"),
        ("SELECT SUM(r.a) FROM r LEFT JOIN r AS s ON r.a = s.a;", "2:", "OUTER JOIN"),
        ("SELECT SUM(a) FROM r WHERE EXISTS (SELECT 1 FROM r);", "2:", "EXISTS"),
    ],
)
def test_errors_are_one_line_with_line_and_column(
    tmp_path: Path, body: str, where: str, message: str
) -> None:
    (tmp_path / "r.csv").write_text("1,x\n")
    path = tmp_path / "bad.sql"
    path.write_text(SCHEMA + body + "\n")
    with pytest.raises(SqlError) as info:
        plan_script(load_script(path))
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}:{where}") and message in text, text


def test_an_unreadable_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "v.sql"
    path.write_text(SCHEMA.replace("'r.csv'", "'missing.csv'") + "SELECT SUM(a) AS s FROM r;\n")
    script = load_script(path)
    with pytest.raises(SqlError, match=r"v\.sql:1:\d+: cannot read .*missing\.csv"):
        replay_script(script, plan_script(script), InputChoice({}, base=tmp_path))
