"""``View.add_count_map`` installs new keys with bulk dict updates; it must leave the view exactly as
the per-entry ``add_counts`` does: payloads, creation numbers, the next number and the changed keys in
order (checkpoints and restores depend on all four)."""

from __future__ import annotations

import operator

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.fivm.views import View

KEY = st.tuples(st.integers(0, 6), st.integers(0, 2))
BATCH = st.dictionaries(KEY, st.integers(-2, 2), max_size=12)


def fresh(index: bool) -> View:
    view = View("V", ("a", "b"), operator.add, lambda p: p == 0)
    if index:
        view.add_index((1,))
    return view


@settings(max_examples=200, deadline=None)
@given(st.lists(BATCH, max_size=6), st.booleans())
def test_a_count_map_equals_its_entries_added_one_by_one(
    batches: list[dict[tuple[int, int], int]], index: bool
) -> None:
    bulk, loop = fresh(index), fresh(index)
    for batch in batches:
        bulk.add_count_map(batch)
        loop.add_counts(batch.items())
        assert bulk.data == loop.data and list(bulk.data) == list(loop.data)
        assert bulk.seq == loop.seq and bulk.next_seq == loop.next_seq
        assert list(bulk.changed) == list(loop.changed)
        assert bulk.indexes == loop.indexes
        assert 0 not in bulk.data.values()
