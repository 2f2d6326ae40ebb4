"""Reusing a sketch for another instance of its template (docs/sketches/algorithm.md §2.7.1).

Random instances of four templates (HAVING thresholds, HAVING intervals, LIMIT, WHERE of a monotone
query) over random maintained data: whenever the rule accepts Q2 for Q1's sketch, Q2 answered over
only the sketched fragments equals DuckDB's Q2 over all the data. The refusals are checked on the
cases the rule names, and one refusal is shown to be necessary.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.sketches.compiler import compile_options
from ivmstream.services.sketches.reuse import pick, reuse_refusal
from tests.unit.sketches.sketches_oracle import SCHEMA, duckdb_answer, engine, event, norm_rows, options
from tests.unit.sketches.test_sketches_properties import batches

# template (engine SQL, DuckDB SQL with the engine's tie-break) with {0}, {1} constants; partitioned column
TEMPLATES: dict[str, tuple[str, str | None, str]] = {
    "having": ("SELECT a, SUM(b) FROM r GROUP BY a HAVING SUM(b) > {0} AND COUNT(*) >= {1}", None, "a"),
    "between": ("SELECT a, COUNT(*) FROM r GROUP BY a HAVING COUNT(*) BETWEEN {0} AND {1}", None, "a"),
    "limit": (
        "SELECT a, SUM(b) AS t FROM r GROUP BY a ORDER BY t DESC LIMIT {0}",
        "SELECT a, SUM(b) AS t FROM r GROUP BY a ORDER BY t DESC NULLS LAST, a NULLS FIRST LIMIT {0}",
        "a",
    ),
    "where-monotone": ("SELECT a, SUM(b) FROM r WHERE c < {0} AND b >= {1} GROUP BY a", None, "b"),
}
CONST = st.integers(0, 8)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
@settings(max_examples=12)
@given(data=st.data())
def test_an_accepted_instance_answers_over_the_sketch_as_over_all_data(
    name: str, data: st.DataObject
) -> None:
    sql, duck_sql, column = TEMPLATES[name]
    c1 = (data.draw(CONST), data.draw(CONST))
    c2 = tuple(v + data.draw(st.integers(-2, 2)) for v in c1)
    q1, q2 = sql.format(*c1), sql.format(*c2)
    partition = {"r": {"column": column, "boundaries": [2, 4, 6, 8]}}
    safety = compile_options(options(q1, partition)).safety
    if reuse_refusal(q1, q2, safety) is not None:
        with pytest.raises(ValueError, match="cannot reuse the sketch"):
            engine(q1, partition, instances=[q2])
        return
    e = engine(q1, partition, instances=[q2])
    model: dict[str, Counter[tuple[Any, ...]]] = {t: Counter() for t in SCHEMA}
    for batch in data.draw(batches()):
        e.apply([event(t, row, n) for t, row, n in batch if t == "r"])
        for t, row, n in batch:
            model[t][row] += n
        (reused,) = e.result()["instances"]
        ordered = e.compiled.instances[0][1].ordered
        want = duckdb_answer((duck_sql or sql).format(*c2), model, ordered)
        assert norm_rows(reused["answer"], ordered) == want


@pytest.mark.parametrize(
    ("q1", "q2", "safety", "accepted"),
    [
        (
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 5",
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 7",
            "S2",
            True,
        ),
        (
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 5",
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 3",
            "S2",
            False,
        ),
        (
            "SELECT a FROM r GROUP BY a HAVING 5 < SUM(b)",
            "SELECT a FROM r GROUP BY a HAVING 7 < SUM(b)",
            "S2",
            True,
        ),
        (
            "SELECT a FROM r GROUP BY a HAVING AVG(b) < 5",
            "SELECT a FROM r GROUP BY a HAVING AVG(b) < 4",
            "S2",
            True,
        ),
        (
            "SELECT a FROM r GROUP BY a HAVING SUM(b) = 5",
            "SELECT a FROM r GROUP BY a HAVING SUM(b) = 6",
            "S2",
            False,
        ),
        (
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 5 OR COUNT(*) > 1",
            "SELECT a FROM r GROUP BY a HAVING SUM(b) > 6 OR COUNT(*) > 1",
            "S2",
            False,
        ),
        ("SELECT a FROM r WHERE c > 1 GROUP BY a", "SELECT a FROM r WHERE c > 2 GROUP BY a", "S1", True),
        (
            "SELECT a FROM r WHERE c > 1 GROUP BY a HAVING SUM(b) > 5",
            "SELECT a FROM r WHERE c > 2 GROUP BY a HAVING SUM(b) > 5",
            "S2",
            False,
        ),
        ("SELECT a, b FROM r ORDER BY b LIMIT 5", "SELECT a, b FROM r ORDER BY b LIMIT 3", "S3", True),
        ("SELECT a, b FROM r ORDER BY b LIMIT 5", "SELECT a, b FROM r ORDER BY b LIMIT 6", "S3", False),
        ("SELECT a, b FROM r ORDER BY b LIMIT 5", "SELECT a, b FROM r ORDER BY a LIMIT 3", "S3", False),
        ("SELECT a, SUM(b * 2) FROM r GROUP BY a", "SELECT a, SUM(b * 3) FROM r GROUP BY a", "S1", False),
    ],
)
def test_the_rule(q1: str, q2: str, safety: str, accepted: bool) -> None:
    assert (reuse_refusal(q1, q2, safety) is None) == accepted


def test_a_stricter_having_under_a_limit_is_refused_because_it_would_be_wrong() -> None:
    """Group 1: one row, sum 10; group 2: three rows, sum 6. Q1 keeps group 1 only; Q2 (COUNT(*) > 2)
    wants group 2, whose rows the sketch left out."""
    sql = "SELECT a, SUM(b) AS t FROM r GROUP BY a HAVING COUNT(*) > {} ORDER BY t DESC LIMIT 1"
    q1, q2 = sql.format(0), sql.format(2)
    partition = {"r": {"column": "a", "boundaries": [2]}}
    e = engine(q1, partition)
    e.apply([event("r", (1, 10, 0), 1), *(event("r", (2, 2, c), 1) for c in range(3))])
    assert reuse_refusal(q1, q2, e.compiled.safety) is not None
    wrong = e.answer(e.sketch(), compile_options(options(q2, partition)))
    assert wrong == [] != e.answer(None, compile_options(options(q2, partition)))


def test_pick_takes_the_reusable_sketch_with_fewest_fragments() -> None:
    sql = "SELECT a FROM r GROUP BY a HAVING SUM(b) > {}"
    candidates = [(sql.format(9), 0b1), (sql.format(3), 0b111), (sql.format(5), 0b11)]
    assert pick(candidates, sql.format(6), ["S2"] * 3) == 2
    assert pick(candidates, sql.format(1), ["S2"] * 3) is None
