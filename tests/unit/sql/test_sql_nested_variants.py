"""DBToaster's Q17a and Q18a are recognised by structure: variants with other aliases, operand orders
and constants route to the same RPAI plans with the query's constants and equal DuckDB; Q18a's reduction
to Q18 needs the outer bound 1, so another bound is refused in one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ivmstream.sql import SqlError, load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd, duckdb_rows, same_rows

HEAD = "INCLUDE 'test/queries/tpch/schemas.sql';\n"
Q17A = """SELECT SUM(li.extendedprice) AS revenue FROM part pa, lineitem li
WHERE 1.5 * (SELECT SUM(inner_l.quantity) FROM lineitem inner_l WHERE pa.partkey = inner_l.partkey)
      > li.quantity
  AND li.partkey = pa.partkey;
"""
Q18A = """SELECT cu.custkey, SUM(x.quantity) AS total FROM lineitem x, orders od, customer cu
WHERE od.orderkey = x.orderkey AND cu.custkey = od.custkey
  AND (SELECT SUM(1) FROM lineitem y WHERE y.orderkey = x.orderkey
       AND (SELECT SUM(z.quantity) FROM lineitem z WHERE z.orderkey = y.orderkey) > 120) >= 1
GROUP BY cu.custkey;
"""


def _script(cwd: Path, text: str) -> Path:
    include = cwd / "test" / "queries" / "tpch"
    include.mkdir(parents=True, exist_ok=True)
    if not (include / "schemas.sql").exists():
        (include / "schemas.sql").symlink_to(ROOT / "tpch" / "schemas.sql")
    path = cwd / "variant.sql"
    path.write_text(HEAD + text)
    return path


@pytest.mark.parametrize("dataset", ["tiny", "tiny_del"])
@pytest.mark.parametrize(
    ("text", "rpai_plan", "parameters"),
    [(Q17A, "q17a", {"fraction": "3/2"}), (Q18A, "q18", {"threshold": 120})],
    ids=["q17a", "q18a"],
)
def test_variants_route_with_their_constants_and_equal_duckdb(
    tmp_path: Path, text: str, rpai_plan: str, parameters: dict[str, object], dataset: str
) -> None:
    with dbtoaster_cwd(tmp_path, DATA) as cwd:
        script = load_script(_script(cwd, text))
        (plan,) = plan_script(script)
        assert (plan.service, plan.plan["rpai_plan"], plan.plan["parameters"]) == (
            "vwap",
            rpai_plan,
            parameters,
        )
        (result,) = replay_script(script, [plan], InputChoice({}, dataset))
        expected = duckdb_rows(script, script.views[0], InputChoice({}, dataset))
    assert result["rows"] and any(v for row in result["rows"] for v in row[-1:])  # not vacuous
    assert same_rows(result["rows"], expected), (result["rows"][:5], expected[:5])


def test_q18a_with_another_outer_bound_is_refused_in_one_line(tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA) as cwd:
        path = _script(cwd, Q18A.replace(">= 1", ">= 2"))
        with pytest.raises(SqlError) as info:
            plan_script(load_script(path))
    text = str(info.value)
    assert "\n" not in text and re.match(rf"{re.escape(str(path))}:\d+:\d+: ", text), text
    assert "nested aggregate matches none of the RPAI plans" in text
