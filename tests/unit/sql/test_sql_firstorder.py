"""Views with a predicate across relations that no view tree factorizes route to the firstorder service
(first-order IVM): DBToaster's axfinder and brokerspread on the finance traces, and compiled views over
random tables with deletions (hypothesis), each against DuckDB; explain names the plan and its cost;
what the class does not support is refused in one line."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sql import SqlError, load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import ROOT, SHARED, dbtoaster_cwd, duckdb_book_rows, duckdb_rows, same_rows

FINANCE = ("axfinder", "brokerspread")


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "finance" / "standard").is_dir(), reason="shared DBToaster data absent")
@pytest.mark.parametrize("name", FINANCE)
def test_finance_queries_on_the_standard_trace_equal_duckdb(tmp_path: Path, name: str) -> None:
    with dbtoaster_cwd(tmp_path, SHARED):
        script = load_script(ROOT / "finance" / f"{name}.sql")
        plans = plan_script(script)
        (result,) = replay_script(script, plans, InputChoice({}, "standard"))
    assert result["service"] == "firstorder"
    expected = duckdb_book_rows(script.views[0], SHARED / "finance" / "standard" / "finance.csv")
    assert same_rows(result["rows"], expected), (result["rows"], expected)


def test_explain_names_the_first_order_plan_and_its_cost(tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path):
        (plan,) = plan_script(load_script(ROOT / "finance" / "brokerspread.sql"))
    out = plan.explain()
    assert (out["service"], out["strategy"]) == ("firstorder", "first-order")
    assert "'x.t > y.t' is not an equality" in out["why"]
    assert out["cost"].startswith("O(size of the other relations) per single-tuple update")
    assert out["plan"]["predicate"] == "(t > y_t)"
    assert out["plan"]["delta_queries"] == {
        "x": ["y: lookup on (broker_id)"],
        "y": ["x: lookup on (broker_id)"],
    }


SCHEMA = """
CREATE STREAM r (a INT, x INT, t INT) FROM FILE 'r.csv'
  LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE STREAM s (a INT, y INT, u FLOAT) FROM FILE 's.csv'
  LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE TABLE k (z INT) FROM FILE 'k.csv' LINE DELIMITED CSV (delimiter := '|');
"""
VIEWS = {
    # a residual inequality, GROUP BY, AVG, a CASE over both relations and a selection at intake
    "grouped": "SELECT r.a, SUM(r.x * s.u) AS su, COUNT(*) AS n, AVG(s.y - r.x) AS av, "
    "SUM(CASE WHEN r.t > s.y THEN 1 ELSE 0 END) AS later FROM r, s "
    "WHERE r.a = s.a AND r.x < s.y AND s.u > 0.5 GROUP BY r.a",
    # a disjunction across relations with GROUP BY (fivm takes one without), BETWEEN, a static table
    # joined by nothing but the predicate, and arithmetic over the aggregates
    "disjunction": "SELECT s.a, SUM(r.t) / (COUNT(*) + 1) AS ratio FROM r, s, k "
    "WHERE (r.x - s.y > 1 OR s.y BETWEEN r.t AND r.t + 1) AND k.z <> r.x GROUP BY s.a",
    # no GROUP BY: one row, an empty SUM is 0
    "total": "SELECT SUM(r.x + s.y) AS total, COUNT(*) AS n FROM r, s WHERE r.t >= s.y",
}

rows = st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 4))


@st.composite
def streams(draw: st.DrawFn) -> dict[str, list[str]]:
    """Deletions-format lines of r and s (inserts, duplicates, deletes of live rows) and k's rows."""
    held: dict[str, list[tuple[int, ...]]] = {"r": [], "s": []}
    lines: dict[str, list[str]] = {"r": [], "s": []}
    for step in range(draw(st.integers(2, 30))):
        rel = ["r", "s"][step] if step < 2 else draw(st.sampled_from(["r", "s"]))  # no empty file
        if held[rel] and draw(st.booleans()) and draw(st.booleans()):
            row = held[rel].pop(draw(st.integers(0, len(held[rel]) - 1)))
            flag = 0
        else:
            a, b, c = draw(rows)
            row = (a, b, c) if rel == "r" else (a, b, c / 4)  # u in {0, .25, ..., 1}
            held[rel].append(row)
            flag = 1
        lines[rel].append("|".join(map(str, (step, flag, *row))))
    lines["k"] = [str(z) for z in draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))]
    return lines


@settings(max_examples=8, deadline=None)
@given(data=streams())
def test_compiled_views_equal_duckdb_over_random_tables_with_deletions(data: dict[str, list[str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, lines in data.items():
            (work / f"{name}.csv").write_text("".join(line + "\n" for line in lines))
        sql = work / "views.sql"
        sql.write_text(SCHEMA + "".join(f"CREATE VIEW {n} AS {q};\n" for n, q in VIEWS.items()))
        with dbtoaster_cwd(work, work) as cwd:
            for name in data:
                (cwd / f"{name}.csv").symlink_to(work / f"{name}.csv")
            script = load_script(sql)
            plans = plan_script(script)
            assert {p.service for p in plans} == {"firstorder"}
            results = replay_script(script, plans, InputChoice({}, None))
            for view, result in zip(script.views, results, strict=True):
                expected = duckdb_rows(script, view, InputChoice({}, None))
                assert same_rows(result["rows"], expected), (view.name, result["rows"], expected)


@pytest.mark.parametrize(
    ("query", "construct"),
    [
        ("SELECT r.a, s.y FROM r, s WHERE r.x < s.y", "a view without aggregates"),
        ("SELECT COUNT(DISTINCT r.x) FROM r, s WHERE r.x < s.y", "COUNT(DISTINCT"),
        ("SELECT SUM(r.x) FROM r, s, k WHERE r.x < s.y", "relation k contributes no column"),
    ],
)
def test_what_the_class_does_not_support_is_refused_in_one_line(
    tmp_path: Path, query: str, construct: str
) -> None:
    sql = tmp_path / "v.sql"
    sql.write_text(SCHEMA + query + ";\n")
    with pytest.raises(SqlError) as info:
        plan_script(load_script(sql))
    text = str(info.value)
    assert "\n" not in text and re.match(rf"{re.escape(str(sql))}:\d+:\d+: ", text), text
    assert construct in text, text
