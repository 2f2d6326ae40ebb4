"""Checkpoints (docs/sketches/algorithm.md §6): the operator state written as changed entries and read back.

For every supported shape, with either join variant, Bloom filters and top-m buffers drawn at random:
an engine checkpointed at random cut points (a full scan of its entries, then changed entries only) and
rebuilt from what was stored holds exactly the uninterrupted engine's entries, without a bootstrap
pass, and stays equal to it (entries, sketch, result) over the remaining batches.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.engine import SketchEngine
from tests.unit.sketches.sketches_oracle import engine, event
from tests.unit.sketches.test_sketches_properties import SHAPES, batches, boundaries


def entries(e: SketchEngine) -> dict[tuple[str, bytes], bytes]:
    return {(m, k): v for m, k, v in e.all_entries()}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=8)
@given(data=st.data())
def test_restore_from_changed_entries_equals_uninterrupted(shape: str, data: st.DataObject) -> None:
    sql, _, parts = SHAPES[shape]
    partition = {t: {"column": c, "boundaries": boundaries(data.draw)} for t, c in parts.items()}
    flags: dict[str, Any] = {
        "join": data.draw(st.sampled_from(["mat", "probe"])),
        "bloom": data.draw(st.booleans()),
        "top_m": data.draw(st.sampled_from([0, 1, 2])),
    }
    work = data.draw(batches())
    cut = data.draw(st.integers(1, len(work)))
    first = data.draw(st.integers(0, cut))  # the batch after which the first (full) checkpoint is taken
    straight, live = engine(sql, partition, **flags), engine(sql, partition, **flags)

    def feed(e: SketchEngine, batch: list[tuple[str, tuple[Any, ...], int]]) -> None:
        assert e.apply([event(t, row, n) for t, row, n in batch if t in e.tables]) == []

    stored: dict[tuple[str, bytes], bytes] = {}
    for i, batch in enumerate(work[:cut]):
        if i == first:
            live.changed_entries()
            stored = entries(live)
        feed(live, batch)
        feed(straight, batch)
    if first == cut:
        live.changed_entries()
        stored = entries(live)
    for m, k, v in live.changed_entries():
        if v is None:
            stored.pop((m, k), None)
        else:
            stored[(m, k)] = v
    assert stored == entries(live)  # the changed entries add up to the state

    rebuilt = engine(sql, partition, **flags)
    rebuilt.restore_entries([(m, k, v) for (m, k), v in stored.items()])
    assert entries(rebuilt) == stored  # read back, not recomputed (no bootstrap pass ran)
    assert rebuilt.result() == straight.result()
    assert rebuilt.snapshot() == straight.snapshot()
    for batch in work[cut:]:
        feed(rebuilt, batch)
        feed(straight, batch)
        assert entries(rebuilt) == entries(straight)
        assert rebuilt.result() == straight.result()
        assert rebuilt.sketch() == P.capture_sketch(rebuilt.compiled.root, rebuilt.view(None))  # G2


def test_a_restore_reads_the_state_instead_of_bootstrapping() -> None:
    sql = "SELECT a, MIN(b), COUNT(*) FROM r GROUP BY a HAVING COUNT(*) > 1"
    partition = {"r": {"column": "a", "boundaries": [3, 6]}}
    live = engine(sql, partition, top_m=1)
    live.apply([event("r", (a % 5, a, None), 1) for a in range(20)])
    restored = engine(sql, partition, top_m=1)

    def no_bootstrap() -> None:
        raise AssertionError("a restore from entries must not rebuild the operator state")

    restored._bootstrap = no_bootstrap  # type: ignore[method-assign]
    restored.restore(live.snapshot())
    assert restored.result() == live.result()
    more = [event("r", (1, 1, None), -1), event("r", (1, 6, None), -1), event("r", (7, 2, None), 2)]
    restored.apply(more)
    live.apply(more)
    assert restored.result() == live.result()
    assert restored.snapshot() == live.snapshot()
