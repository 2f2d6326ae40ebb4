"""The probe join (docs/sketches/algorithm.md §2.4.5) against the materialised one, a capture and DuckDB.

Join shapes over random insert/delete batches (both tables changing in one batch, self-joins, cross
products, three-way joins whose lookups span both sides of an inner join): after every batch the probe
engine's sketch equals a fresh capture (G2) and the materialised engine's, and the query over the sketched
fragments equals DuckDB over all the data (G3).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.probe import ProbeJoin
from tests.unit.sketches.sketches_oracle import SCHEMA, duckdb_answer, engine, event, norm_rows
from tests.unit.sketches.test_sketches_properties import SHAPES, batches, boundaries

JOINS = {name: SHAPES[name] for name in ("join-having", "theta-join", "self-join", "cross-product-count")}
JOINS["three-way"] = (
    "SELECT x.a, COUNT(*) AS n, SUM(y.b) FROM r x, s, r y WHERE x.a = s.a AND s.d = y.b AND x.c = y.c "
    "GROUP BY x.a",
    None,
    {"r": "a", "s": "a"},
)
JOINS["three-way-topk"] = (
    "SELECT y.a, s.d, x.b FROM r x JOIN s ON x.b = s.d JOIN r y ON y.a = s.a ORDER BY s.d DESC, x.b LIMIT 3",
    "SELECT y.a, s.d, x.b FROM r x JOIN s ON x.b = s.d JOIN r y ON y.a = s.a ORDER BY s.d DESC NULLS LAST, "
    "x.b NULLS LAST, x.a NULLS FIRST, x.b NULLS FIRST, x.c NULLS FIRST, s.a NULLS FIRST, s.d NULLS FIRST, "
    "y.a NULLS FIRST, y.b NULLS FIRST, y.c NULLS FIRST LIMIT 3",
    {"r": "b"},
)


@pytest.mark.parametrize("shape", sorted(JOINS))
@settings(max_examples=10)
@given(data=st.data())
def test_probe_join_matches_materialised_capture_and_duckdb(shape: str, data: st.DataObject) -> None:
    sql, duck_sql, parts = JOINS[shape]
    partition = {t: {"column": c, "boundaries": boundaries(data.draw)} for t, c in parts.items()}
    flags = {"bloom": data.draw(st.booleans()), "selection_pushdown": data.draw(st.booleans())}
    probe = engine(sql, partition, join="probe", **flags)
    mat = engine(sql, partition, join="mat")
    assert any(isinstance(n, ProbeJoin) for n in probe.compiled.root.walk())
    model: dict[str, Counter[tuple[Any, ...]]] = {t: Counter() for t in SCHEMA}
    for batch in data.draw(batches()):
        events = [event(t, row, n) for t, row, n in batch if t in probe.tables]
        assert probe.apply(events) == []
        mat.apply(events)
        for t, row, n in batch:
            model[t][row] += n
        sketch = probe.sketch()
        assert sketch == P.capture_sketch(probe.compiled.root, probe.view(None))  # G2
        assert sketch == mat.sketch()
    expected = duckdb_answer(duck_sql or sql, model, probe.compiled.ordered)
    assert norm_rows(probe.answer(probe.sketch()), probe.compiled.ordered) == expected  # G3
    assert probe.stats().get("join_entries", 0) == 0  # nothing materialised


def test_probe_engine_bootstraps_after_loading_a_store() -> None:
    """A store loaded before the first maintenance (restore) is pushed table by table: no double joins."""
    sql, _, parts = JOINS["join-having"]
    partition = {t: {"column": c, "boundaries": [3, 6]} for t, c in parts.items()}
    rows = [event("r", (a % 4, a, a), 1) for a in range(12)] + [event("s", (a % 4, a), 1) for a in range(8)]
    loaded, fed = engine(sql, partition, join="probe"), engine(sql, partition, join="probe")
    seed = engine(sql, partition, strategy="full")
    seed.apply(rows)
    loaded.restore(seed.snapshot())
    fed.apply(rows)
    more = [event("r", (1, 1, 1), -1), event("s", (2, 9), 1)]
    loaded.apply(more)
    fed.apply(more)
    assert loaded.sketch() == fed.sketch() == P.capture_sketch(fed.compiled.root, fed.view(None))
