"""JSON Patch changelogs (shared/changelog.py): applying the diff of two results gives the second."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ivmstream.changelog import apply, diff

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
names = st.text(alphabet="ab/~0", max_size=3)  # '/' and '~' must be escaped in JSON Pointers
docs = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=4),
    max_leaves=12,
)


@given(docs, docs)
def test_applying_the_diff_gives_the_new_document(before, after):
    patch = diff(before, after)
    assert apply(before, patch) == after
    assert diff(after, after) == []
    if not patch:
        assert before == after


def test_a_member_set_to_null_is_kept_and_only_changes_are_sent():
    before = {"k": 3, "sample": [1, 2], "join_size": 5, "stats": {"n": 1, "m": 2}}
    after = {"k": 3, "sample": [1, 2, 3], "join_size": None, "stats": {"n": 1, "m": 3}}
    patch = diff(before, after)
    assert apply(before, patch) == after
    assert {op["path"] for op in patch} == {"/sample", "/join_size", "/stats/m"}
