"""Randomised differential tests: after every batch the maintained sketch equals a fresh capture (G2) and
the query over the sketched fragments equals DuckDB over all the data (G3), for each supported shape.

Tables hold values 0..9 so duplicates, ties and group collisions are common; batches mix inserts of new
rows (and duplicates) with deletes of stored rows, including deleting everything and re-inserting.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.sketches import plan as P
from tests.unit.sketches.sketches_oracle import SCHEMA, duckdb_answer, engine, event, norm_rows

# (engine SQL, DuckDB SQL with the engine's tie-break made explicit, partitioned table -> column).
SHAPES: dict[str, tuple[str, str | None, dict[str, str]]] = {
    "having-sum": (
        "SELECT a, SUM(b) AS s, COUNT(*) AS n FROM r GROUP BY a HAVING SUM(b) > 6",
        None,
        {"r": "a"},
    ),
    "having-avg-minmax-nulls": (
        "SELECT a, AVG(b), MIN(c), MAX(c), COUNT(c), SUM(c) FROM r GROUP BY a HAVING AVG(b) < 5",
        None,
        {"r": "a"},
    ),
    "join-having": (
        "SELECT r.a, COUNT(*) AS n, SUM(s.d) FROM r JOIN s ON r.a = s.a GROUP BY r.a HAVING COUNT(*) > 2",
        None,
        {"r": "a", "s": "a"},
    ),
    "select-where": ("SELECT a, b FROM r WHERE c > 3", None, {"r": "b"}),
    "distinct": ("SELECT DISTINCT b FROM r WHERE a < 7", None, {"r": "c"}),
    "topk-spj": (
        "SELECT a, b, c FROM r ORDER BY b DESC, a LIMIT 3",
        "SELECT a, b, c FROM r ORDER BY b DESC NULLS LAST, a NULLS LAST, a NULLS FIRST, b NULLS FIRST, "
        "c NULLS FIRST LIMIT 3",
        {"r": "c"},
    ),
    "topk-aggregate": (
        "SELECT a, SUM(b) AS t FROM r GROUP BY a ORDER BY t DESC LIMIT 2",
        "SELECT a, SUM(b) AS t FROM r GROUP BY a ORDER BY t DESC NULLS LAST, a NULLS FIRST LIMIT 2",
        {"r": "a"},
    ),
    "scalar-aggregate": ("SELECT COUNT(*), SUM(b), AVG(c), MIN(b) FROM r WHERE a > 2", None, {"r": "b"}),
    "theta-join": ("SELECT r.b, s.d FROM r, s WHERE r.a = s.a AND r.c < s.d", None, {"s": "d", "r": "b"}),
    "union-all": (
        "SELECT a, b FROM r WHERE b > 5 UNION ALL SELECT a, d FROM s WHERE d < 3",
        None,
        {"r": "a"},
    ),
    "self-join": (
        "SELECT x.a, COUNT(*) FROM r x JOIN r y ON x.a = y.a AND x.b < y.b GROUP BY x.a HAVING COUNT(*) > 1",
        None,
        {"r": "a"},
    ),
    "distinct-topk": (
        "SELECT DISTINCT a FROM r ORDER BY a DESC LIMIT 3",
        "SELECT DISTINCT a FROM r ORDER BY a DESC NULLS LAST LIMIT 3",
        {"r": "a"},
    ),
    "cross-product-count": ("SELECT COUNT(*), SUM(r.b * s.d) FROM r, s WHERE r.c = 1", None, {"s": "a"}),
}

VALUE = st.integers(0, 9)
ROW = {
    "r": st.tuples(VALUE, VALUE, st.none() | VALUE),
    "s": st.tuples(VALUE, VALUE),
}


@st.composite
def batches(draw: Any) -> list[list[tuple[str, tuple[Any, ...], int]]]:
    """Up to 6 batches of inserts and deletes against a model of the tables (deletes only of stored rows)."""
    model: dict[str, Counter[tuple[Any, ...]]] = {t: Counter() for t in SCHEMA}
    out = []
    for _ in range(draw(st.integers(1, 6))):
        batch = []
        if draw(st.integers(0, 9)) == 0:  # delete everything, then re-insert some of it
            for t, rows in model.items():
                batch += [(t, r, -n) for r, n in rows.items()]
                model[t] = Counter()
        for _ in range(draw(st.integers(1, 12))):
            t = draw(st.sampled_from(sorted(SCHEMA)))
            stored = sorted((r for r, n in model[t].items() if n > 0), key=repr)
            if stored and draw(st.booleans()):
                row = draw(st.sampled_from(stored))
                batch.append((t, row, -1))
                model[t][row] -= 1
            else:
                row = draw(ROW[t])
                n = draw(st.integers(1, 2))
                batch.append((t, row, n))
                model[t][row] += n
        out.append(batch)
    return out


def boundaries(draw: Any) -> list[int]:
    k = draw(st.sampled_from([0, 1, 2, 6, 9]))
    return sorted(draw(st.sets(st.integers(1, 9), min_size=k, max_size=k)))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=12)
@given(data=st.data())
def test_maintained_sketch_is_a_capture_and_skipping_is_safe(shape: str, data: st.DataObject) -> None:
    sql, duck_sql, parts = SHAPES[shape]
    partition = {t: {"column": c, "boundaries": boundaries(data.draw)} for t, c in parts.items()}
    flags = {
        "bloom": data.draw(st.booleans()),
        "selection_pushdown": data.draw(st.booleans()),
        "join": data.draw(st.sampled_from(["mat", "probe"])),
    }
    imp = engine(sql, partition, "imp", **flags)
    full = engine(sql, partition, "full")
    model: dict[str, Counter[tuple[Any, ...]]] = {t: Counter() for t in SCHEMA}
    for batch in data.draw(batches()):
        events = [event(t, row, n) for t, row, n in batch if t in imp.tables]
        assert imp.apply(events) == []
        assert full.apply(events) == []
        for t, row, n in batch:
            model[t][row] += n
        for t, spec in imp.specs.items():  # a capture annotates the store's rows by the fragment they sit in
            for f, rows in imp.store[t].items():
                assert all(spec.fragment(row[spec.position]) == f for row in rows)
        sketch = imp.sketch()
        assert sketch == P.capture_sketch(imp.compiled.root, imp.view(None))  # G2: a fresh capture
        assert sketch == full.sketch()
        expected = duckdb_answer(duck_sql or sql, model, imp.compiled.ordered)
        assert norm_rows(imp.answer(sketch), imp.compiled.ordered) == expected  # G3: skipping is safe
        assert norm_rows(imp.answer(None), imp.compiled.ordered) == expected
        result = imp.result()
        assert result["rows_scanned"] == imp.rows_scanned(sketch) <= result["rows_total"]


@settings(max_examples=25)
@given(data=st.data())
def test_batching_does_not_change_the_sketch_or_the_state(data: st.DataObject) -> None:
    """The same updates in one batch or one event at a time give the same sketch and snapshot."""
    sql, _, parts = SHAPES[data.draw(st.sampled_from(sorted(SHAPES)))]
    partition = {t: {"column": c, "boundaries": boundaries(data.draw)} for t, c in parts.items()}
    together, single = engine(sql, partition), engine(sql, partition)
    for batch in data.draw(batches()):
        events = [event(t, row, n) for t, row, n in batch if t in together.tables]
        together.apply(events)
        for ev in events:
            single.apply([ev])
        assert together.sketch() == single.sketch()
        assert together.snapshot() == single.snapshot()
        assert together.result() == single.result()
