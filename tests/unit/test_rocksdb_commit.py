"""RocksDBStore.commit stages each run of one map's puts in key order and a delete where it stands
(ivmstream.state.staging): on random change lists (maps interleaved or in runs, puts and
deletes, an entry put twice, several keys) what it stores equals a dict that applies the same changes
in order, whether staged by the compiled pass or its Python form."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.state import StateChanges, rocksdb, staging
from ivmstream.state.rocksdb import RocksDBStore

change = st.tuples(
    st.sampled_from(["bag", "s"]),
    st.sampled_from([b"a", b"b", b"c", b"d"]),
    st.sampled_from([b"1", b"2", None]),
)
runs = st.lists(
    st.tuples(st.sampled_from(["bag", "s"]), st.lists(st.sampled_from([b"a", b"b", b"c"]), max_size=4))
)
commits = st.lists(
    st.dictionaries(
        st.sampled_from(["", "k1", "k2"]),
        st.one_of(
            st.lists(change, max_size=8),  # interleaved, with deletes
            # runs of puts, an entry possibly put twice with two values (the last one stays)
            runs.map(lambda rs: [(m, e, b"v%d" % i) for m, es in rs for i, e in enumerate(es)]),
        ),
        max_size=3,
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.parametrize("stage", ["compiled", "python"])
@settings(max_examples=60, deadline=None)
@given(batches=commits)
def test_stored_entries_equal_the_changes_applied_in_order(store, stage, batches):
    chosen = staging.compiled_stage_entries if stage == "compiled" else staging.py_stage_entries
    assert chosen is not None, "the compiled staging pass is not built (tests/unit/test_state_staging.py)"
    kept, rocksdb.stage_entries = rocksdb.stage_entries, chosen
    try:
        check_commits(store, batches)
    finally:
        rocksdb.stage_entries = kept


def check_commits(store: RocksDBStore, batches: list[dict[str, list]]) -> None:
    tag = f"{next(_EXAMPLES)}/"  # one database for every example (opening one costs more than the example)
    model: dict[str, dict[tuple[str, bytes], bytes]] = {}
    for offset, entries in enumerate(batches):
        changes = StateChanges()
        changes.entries = {tag + key: list(items) for key, items in entries.items()}
        store.commit("in", 0, offset, changes, b"env")
        for key, items in entries.items():
            for map_name, entry, value in items:
                if value is None:
                    model.setdefault(tag + key, {}).pop((map_name, entry), None)
                else:
                    model.setdefault(tag + key, {})[(map_name, entry)] = value
    stored = store.load("in", 0)
    assert stored.offset == len(batches) - 1
    got = {
        key: {(m, e): v for m, e, v in entries}
        for key, entries in stored.entries.items()
        if key.startswith(tag)
    }
    assert got == {key: entries for key, entries in model.items() if entries}


_EXAMPLES = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[RocksDBStore]:
    opened = RocksDBStore(tmp_path_factory.mktemp("rocksdb-commit"), "t")
    yield opened
    opened.close()
