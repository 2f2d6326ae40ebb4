"""Top-m buffers (docs/sketches/algorithm.md §2.6.3): bounded MIN/MAX and top-k state, refilled on underflow.

The buffer is checked against the whole bag it stands for; the engine with a small ``top_m`` against a
fresh capture (G2) and the unbounded engine after every batch and DuckDB over all the data at the end
(G3), on workloads that keep deleting the best rows so the buffers drain again and again.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.compiler import compile_options
from ivmstream.services.sketches.options import OPTIONS
from ivmstream.services.sketches.topm import PrefixBuffer
from tests.unit.sketches.sketches_oracle import duckdb_answer, engine, event, norm_rows, options

OPS = st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 3)), max_size=60)


@settings(max_examples=200)
@given(m=st.integers(1, 4), ops=OPS)
def test_buffer_is_an_exact_prefix_of_the_bag(m: int, ops: list[tuple[int, int]]) -> None:
    buf = PrefixBuffer(m)
    bag: Counter[int] = Counter()
    for key, n in ops:
        n = max(n, -bag[key])  # deletes only of units the bag holds
        if not n:
            continue
        buf.add(key, key, n)
        bag[key] += n
        if buf.underflow(m):
            buf.refill((k, k, c) for k, c in bag.items())
        whole = sorted(bag.elements())
        stored = [k for k, c in buf.values() for _ in range(c)]
        assert buf.total == len(whole)
        assert buf.units == len(stored) <= m
        assert stored == whole[: len(stored)]  # an exact prefix
        assert len(stored) == min(m, len(whole))  # refilled whenever short
        assert buf.first() == (whole[0] if whole else None)


SHAPES = {
    "min-max": (
        "SELECT a, MIN(c), MAX(b), COUNT(*) FROM r GROUP BY a HAVING MIN(c) < 4",
        None,
        {"r": "a"},
    ),
    "scalar-min-max": ("SELECT MIN(b), MAX(c) FROM r", None, {"r": "b"}),
    "topk-spj": (
        "SELECT a, b, c FROM r ORDER BY b, a LIMIT 2",
        "SELECT a, b, c FROM r ORDER BY b NULLS LAST, a NULLS LAST, a NULLS FIRST, b NULLS FIRST, "
        "c NULLS FIRST LIMIT 2",
        {"r": "c"},
    ),
    "topk-join-aggregate": (
        "SELECT r.a, MAX(s.d) AS t FROM r JOIN s ON r.a = s.a GROUP BY r.a ORDER BY t DESC LIMIT 2",
        "SELECT r.a, MAX(s.d) AS t FROM r JOIN s ON r.a = s.a GROUP BY r.a "
        "ORDER BY t DESC NULLS LAST, r.a NULLS FIRST LIMIT 2",
        {"r": "a", "s": "a"},
    ),
}
# The column whose best values the buffers keep, and whether best is largest: the workload deletes those.
BEST = {
    "min-max": (2, False),
    "scalar-min-max": (1, False),
    "topk-spj": (1, False),
    "topk-join-aggregate": (1, True),
}


@st.composite
def draining(draw: Any, column: int, largest: bool) -> list[list[tuple[str, tuple[Any, ...], int]]]:
    """Batches that mostly delete the best row (by ``column``) of one group ``a``: what the buffers keep."""

    def rank(row: tuple[Any, ...]) -> tuple[Any, ...]:
        v = row[min(column, len(row) - 1)]  # s rows have two columns: its d
        return (v is None, 0 if v is None else -v if largest else v, repr(row))

    model: dict[str, Counter[tuple[Any, ...]]] = {"r": Counter(), "s": Counter()}
    group, value = st.integers(0, 2), st.integers(0, 9)
    out = []
    for _ in range(draw(st.integers(2, 7))):
        batch = []
        for _ in range(draw(st.integers(1, 10))):
            t = draw(st.sampled_from(["r", "r", "s"]))
            g = draw(group)
            stored = sorted((r for r, n in model[t].items() if n > 0 and r[0] == g), key=rank)
            if stored and draw(st.integers(0, 2)) > 0:
                row = stored[0]
                batch.append((t, row, -1))
                model[t][row] -= 1
            else:
                shape = st.tuples(group, value, st.none() | value) if t == "r" else st.tuples(group, value)
                row = draw(shape)
                n = draw(st.integers(1, 2))
                batch.append((t, row, n))
                model[t][row] += n
        out.append(batch)
    return out


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=15)
@given(data=st.data())
def test_bounded_state_matches_capture_and_duckdb(shape: str, data: st.DataObject) -> None:
    sql, duck_sql, parts = SHAPES[shape]
    partition = {t: {"column": c, "boundaries": [2, 5, 8]} for t, c in parts.items()}
    m = data.draw(st.integers(1, 2))
    bounded = engine(sql, partition, top_m=m)
    unbounded = engine(sql, partition)
    model: dict[str, Counter[tuple[Any, ...]]] = {"r": Counter(), "s": Counter()}
    for batch in data.draw(draining(*BEST[shape])):
        events = [event(t, row, n) for t, row, n in batch if t in bounded.tables]
        assert bounded.apply(events) == []
        unbounded.apply(events)
        for t, row, n in batch:
            model[t][row] += n
        sketch = bounded.sketch()
        assert sketch == P.capture_sketch(bounded.compiled.root, bounded.view(None))  # G2
        assert sketch == unbounded.sketch()
        assert bounded.answer(sketch) == unbounded.answer(None)  # G3 (unbounded = DuckDB elsewhere)
    expected = duckdb_answer(duck_sql or sql, model, bounded.compiled.ordered)
    assert norm_rows(bounded.answer(bounded.sketch()), bounded.compiled.ordered) == expected


def test_deletes_that_drain_the_buffers_refill_them() -> None:
    """Deleting the minimum again and again empties a one-value buffer each time: every read refills."""
    sql = "SELECT a, MIN(b) FROM r GROUP BY a"
    bounded = engine(sql, {"r": {"column": "b", "boundaries": [3, 6]}}, top_m=1)
    rows = [(1, b, None) for b in range(9)]
    bounded.apply([event("r", row, 1) for row in rows])
    for low in range(8):
        bounded.apply([event("r", rows[low], -1)])
        assert bounded.answer(None) == [[1, low + 1]]
        assert bounded.sketch() == P.capture_sketch(bounded.compiled.root, bounded.view(None))
    assert bounded.stats()["topm_refills"] == 8
    assert bounded.stats()["groups"] == 1


def test_top_m_is_validated_and_at_least_k() -> None:
    opts = options("SELECT a FROM r ORDER BY a LIMIT 3", {"r": {"column": "a", "boundaries": [5]}})
    compiled = compile_options({**opts, "top_m": 1})
    top = next(n for n in compiled.root.walk() if isinstance(n, P.TopK))
    assert top.state.m == 3  # a buffer smaller than k could not answer the top-k
    with pytest.raises(ValueError, match="integer >= 0"):
        OPTIONS["top_m"].parse(-1)
