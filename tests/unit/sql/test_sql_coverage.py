"""DBToaster's query suite as it ships it (TPC-H 1-22 with its variants, the finance queries): each query
either routes to a service and equals DuckDB on the tiny data sets (and the deletion stream where the
query reads TPC-H), or is refused before anything runs in one line naming the construct. docs/sql.md
reports the count; a test keeps it true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ivmstream.sql import SqlError, load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd, duckdb_book_rows, duckdb_rows, same_rows

QUERIES = sorted(
    [p for p in (ROOT / "tpch").glob("query*.sql")] + [p for p in (ROOT / "finance").glob("*.sql")],
    key=lambda p: (p.parent.name, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.stem)]),
)
# Refused queries -> the construct their one-line refusal names.
REFUSED = {
    "query2": "EXISTS",
    "query4": "EXISTS",
    "query7": "derived table",
    "query8": "derived table",
    "query9": "derived table",
    "query11": "derived table",
    "query13": "derived table",
    "query15": "EXISTS",
    "query16": "nested aggregate matches none of the RPAI plans",
    "query20": "nested aggregate matches none of the RPAI plans",
    "query21": "EXISTS",
    "query22": "EXISTS",
}
DOCS = Path(__file__).resolve().parents[3] / "docs" / "sql.md"


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.stem}"


@pytest.mark.parametrize("sql", QUERIES, ids=_id)
def test_each_query_routes_and_equals_duckdb_or_is_refused_in_one_line(tmp_path: Path, sql: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        script = load_script(sql)
        if sql.stem in REFUSED:
            with pytest.raises(SqlError) as info:
                plan_script(script)
            text = str(info.value)
            assert "\n" not in text and re.match(rf"{re.escape(str(sql))}:\d+:\d+: ", text), text
            assert REFUSED[sql.stem] in text, text
            return
        plans = plan_script(script)
        datasets = ["tiny", "tiny_del"] if sql.parent.name == "tpch" else ["tiny"]
        for dataset in datasets:
            (result,) = replay_script(script, plans, InputChoice({}, dataset))
            if sql.parent.name == "tpch":
                expected = duckdb_rows(script, script.views[0], InputChoice({}, dataset))
            else:
                expected = duckdb_book_rows(script.views[0], DATA / "finance" / "tiny" / "finance.csv")
            assert same_rows(result["rows"], expected), (dataset, result["rows"][:5], expected[:5])


def test_the_count_in_the_docs_is_true() -> None:
    text = DOCS.read_text()
    m = re.search(r"\*\*(\d+) of the (\d+) queries\*\* route", text)
    assert m is not None, "docs/sql.md states how many of DBToaster's queries route"
    assert (int(m.group(1)), int(m.group(2))) == (len(QUERIES) - len(REFUSED), len(QUERIES))
    for name in REFUSED:
        assert f"`{name}`" in text, f"docs/sql.md names the refused {name}"
