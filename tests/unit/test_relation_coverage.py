"""RelationCoverage.count against a brute-force count of the relations of a batch's groups."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.events.coverage import RelationCoverage

NAMES = ("bids", "asks", "orders")


@settings(max_examples=150, deadline=None)
@given(declared=st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True), data=st.data())
def test_counts_equal_a_brute_force_count_per_batch_and_in_total(declared, data):
    # a decoder hands over declared relations only; several declared: a name outside them is counted too
    names = declared if len(declared) == 1 else [*declared, "other"]
    group = st.lists(st.sampled_from(names), max_size=6)
    batches = data.draw(st.lists(st.lists(group, max_size=4), max_size=4))
    coverage = RelationCoverage(declared)
    total: Counter[str] = Counter()
    for groups in batches:
        events = [[UpdateEvent(name, {}, 1) for name in g] for g in groups]
        want = Counter(name for g in groups for name in g)
        assert coverage.count(events) == dict(want)
        total.update(want)
    assert {r: n for r, n in coverage.counts.items() if n} == dict(total)
    assert coverage.silent() == [r for r in declared if not total[r]]
