"""``ivmstream.events.columns``: a batch of events as columns per relation, against the events read one
at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.events.columns import event_columns

events = st.lists(
    st.one_of(
        st.builds(
            lambda a, d: UpdateEvent("r", {"a": a, "b": str(a)}, d),
            st.integers(-3, 3),
            st.sampled_from([1, -2]),
        ),
        st.builds(lambda c, d: UpdateEvent("s", {"c": c}, d), st.floats(-1, 1), st.sampled_from([1, 3])),
    ),
    max_size=30,
)


@given(events)
def test_each_relations_columns_hold_its_rows_in_batch_order(evs):
    batch = event_columns(evs)
    assert batch.size == len(evs)
    assert list(batch.relations) == list(dict.fromkeys(ev.relation for ev in evs))
    for rel, part in batch.relations.items():
        mine = [i for i, ev in enumerate(evs) if ev.relation == rel]
        assert list(part.positions) == mine and len(part) == len(mine)
        assert part.deltas == [evs[i].delta for i in mine]
        assert part.columns == {col: [evs[i].row[col] for i in mine] for col in evs[mine[0]].row}
