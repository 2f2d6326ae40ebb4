"""DBToaster's bare DECIMAL (docs/sql.md, Semantics): its predicates and per-row arithmetic are exact
decimal, and its SUMs accumulate doubles, each row's value the double nearest its exact decimal.

DBToaster's grammar types DECIMAL as a double, but the answers it ships as expected results are exact
decimal ones (TPC-H Q6's `discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01` keeps 0.07, which double
arithmetic drops); these tests pin both halves of the rule against independent evaluations."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script

SQL = """
CREATE STREAM r (id INT, g INT, price DECIMAL, discount DECIMAL)
  FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := '|');
SELECT r.g, SUM(r.price * r.discount) AS revenue, COUNT(*) AS n FROM r
WHERE r.discount BETWEEN (0.06 - 0.01) AND (0.06 + 0.01) GROUP BY r.g;
"""


def _replay(tmp: Path, rows: list[tuple[int, int, str, str]]) -> dict[int, list[object]]:
    (tmp / "r.csv").write_text("".join("|".join(map(str, row)) + "\n" for row in rows))
    (tmp / "q.sql").write_text(SQL)
    script = load_script(tmp / "q.sql")
    (plan,) = plan_script(script)
    assert plan.service == "fivm" and "decimals" not in plan.units[0].options  # floats, not exact rings
    (result,) = replay_script(script, [plan], InputChoice({}, None, base=tmp))
    return {row[0]: row[1:] for row in result["rows"]}


def test_bare_decimal_predicates_decide_in_exact_decimal(tmp_path: Path) -> None:
    assert 0.06 + 0.01 < 0.07  # in doubles the bound misses 0.07, as DBToaster notes for Q6
    rows = [(1, 1, "10.00", "0.05"), (2, 1, "20.00", "0.07"), (3, 1, "40.00", "0.08"), (4, 2, "5.00", "0.04")]
    got = _replay(tmp_path, rows)
    assert set(got) == {1}
    assert got[1][1] == 2  # 0.05 and 0.07 qualify, 0.08 and 0.04 do not
    assert got[1][0] == float(Decimal("10.00") * Decimal("0.05") + Decimal("20.00") * Decimal("0.07"))


def test_a_row_value_is_the_double_nearest_its_exact_decimal(tmp_path: Path) -> None:
    # 0.7 · 0.06 in doubles is 0.041999999999999996, not the double nearest 0.042 (so for 1.1 · 0.07)
    for in_doubles, exact in ((0.7 * 0.06, Decimal("0.042")), (1.1 * 0.07, Decimal("0.077"))):
        assert in_doubles != float(exact)
    got = _replay(tmp_path, [(1, 7, "0.7", "0.06"), (2, 8, "1.1", "0.07")])
    assert got[7][0] == float(Decimal("0.7") * Decimal("0.06"))
    assert got[8][0] == float(Decimal("1.1") * Decimal("0.07"))


def test_sums_accumulate_doubles_within_their_rounding_bound(tmp_path: Path) -> None:
    rng = random.Random(11)
    rows = [(i, i % 3, f"{rng.randrange(1, 10**6)}.{rng.randrange(100):02d}", "0.06") for i in range(300)]
    got = _replay(tmp_path, rows)
    eps = 2.0**-53
    for g in range(3):
        terms = [Decimal(p) * Decimal(d) for _i, gg, p, d in rows if gg == g]
        exact = sum(terms, Decimal(0))
        doubles = [float(t) for t in terms]
        ours = got[g][0]
        assert isinstance(ours, float)
        # each term rounded once (relative eps), each of the n - 1 additions once: |error| <= n·eps·Σ|t|
        bound = len(terms) * eps * sum(abs(t) for t in doubles) * 1.0001
        assert abs(Fraction(ours) - Fraction(exact)) <= Fraction(bound), (g, ours, exact)
        assert math.isclose(ours, math.fsum(doubles), rel_tol=len(terms) * eps)
