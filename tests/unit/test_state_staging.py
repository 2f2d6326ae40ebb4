"""Staging a key's checkpoint entries (ivmstream.state.staging): the compiled pass (shared/state/_staging.c)
makes the same put and delete calls in the same order as its Python form, each run of one map's puts
in stored-key order with a delete where it stands, and what those calls leave equals the changes
applied one at a time to a dict (maps interleaved, deletes, an entry put twice, empty and non-ASCII map
names, entries that are prefixes of one another); the store stages in C unless IVMSTREAM_PURE_PYTHON=1."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.state import staging
from ivmstream.state.base import entry_key, entry_prefix
from tests.unit.extension_checks import printed_in_child, require_built

require_built(
    staging.compiled_stage_entries,
    "staging pass",
    "ivmstream.state._staging",
    "shared/state/_staging.c",
)

C = staging.compiled_stage_entries
PY = staging.py_stage_entries

changes = st.lists(
    st.tuples(
        st.sampled_from(["bag", "s", "", "ñ"]),
        st.binary(max_size=3),  # short entries: duplicates, and entries that are prefixes of others
        st.one_of(st.none(), st.binary(max_size=3)),
    ),
    max_size=40,
)
# long runs of one map's puts, as an engine's change log usually is, with a few other changes mixed in
runs = st.lists(
    st.tuples(st.sampled_from(["bag", "s"]), st.lists(st.binary(min_size=1, max_size=4), max_size=30)),
    max_size=4,
).map(lambda rs: [(m, e, b"%d" % i) for m, es in rs for i, e in enumerate(es)])
# entries sharing a long prefix and differing past their first 16 bytes after it, or only in their
# length or trailing zero bytes: the compiled sort's comparison beyond the bytes it keeps inline
long_entries = st.lists(
    st.tuples(
        st.just("bag"),
        st.tuples(st.sampled_from([b"", b"x"]), st.binary(max_size=24)).map(
            lambda pe: b'["items",["item' + pe[0] + b"\x00" * 15 + pe[1]
        ),
        st.binary(max_size=2),
    ),
    max_size=30,
)


def staged(stage, prefix: bytes, items) -> tuple[list[tuple], int]:
    calls: list[tuple] = []

    def put(k: bytes, v: bytes) -> None:
        calls.append(("put", k, v))

    def delete(k: bytes) -> None:
        calls.append(("delete", k))

    size = stage(put, delete, prefix, items)
    return calls, size


def expected(prefix: bytes, items) -> tuple[dict[bytes, bytes | None], int]:
    """Brute force: each change applied in order (None: deleted), and the bytes of every put."""
    state: dict[bytes, bytes | None] = {}
    size = 0
    for map_name, entry, value in items:
        stored = entry_key(prefix, map_name, entry)
        state[stored] = value
        if value is not None:
            size += len(stored) + len(value)
    return state, size


def expected_calls(prefix: bytes, items) -> list[tuple]:
    """Brute force: the changes cut into runs (one map's consecutive puts), each run's puts sorted by
    stored key (stable), a delete where it stands."""
    calls: list[tuple] = []
    run: list[tuple] = []
    for i, (map_name, entry, value) in enumerate(items):
        if run and (value is None or map_name != items[i - 1][0]):
            calls += sorted(run, key=lambda c: c[1])
            run = []
        stored = entry_key(prefix, map_name, entry)
        if value is None:
            calls.append(("delete", stored))
        else:
            run.append(("put", stored, value))
    return calls + sorted(run, key=lambda c: c[1])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["", "k", "κλειδί"]), st.one_of(changes, runs, long_entries))
def test_compiled_and_python_stage_the_same_calls_and_the_changes_in_order(key, items):
    prefix = entry_prefix(key)
    got_c, size_c = staged(C, prefix, items)
    got_py, size_py = staged(PY, prefix, items)
    assert got_c == got_py == expected_calls(prefix, items)
    state, size = expected(prefix, items)
    assert size_c == size_py == size
    applied: dict[bytes, bytes | None] = {}
    for call in got_c:
        applied[call[1]] = call[2] if call[0] == "put" else None
    assert applied == state
    assert len(got_c) == len(items)


def test_a_run_is_put_in_key_order_and_a_delete_where_it_stands():
    prefix = entry_prefix("k")
    items = [("bag", b"c", b"1"), ("bag", b"a", b"2"), ("bag", b"a", b"3"), ("bag", b"b", None)]
    items += [("bag", b"b", b"4"), ("s", b"x", b"5"), ("bag", b"0", b"6")]
    bag, s = entry_key(prefix, "bag", b""), entry_key(prefix, "s", b"")
    want = [
        ("put", bag + b"a", b"2"),  # stable: an entry put twice keeps its order, so its last value stays
        ("put", bag + b"a", b"3"),
        ("put", bag + b"c", b"1"),
        ("delete", bag + b"b"),
        ("put", bag + b"b", b"4"),
        ("put", s + b"x", b"5"),
        ("put", bag + b"0", b"6"),
    ]
    for stage in (C, PY):
        calls, _size = staged(stage, prefix, items)
        assert calls == want


@pytest.mark.parametrize(
    "items",
    [[("bag", b"a")], [("bag", "a", b"1")], [("bag", b"a", "1")], [(b"bag", b"a", b"1")], [None]],
)
def test_a_malformed_change_is_refused(items):
    with pytest.raises(TypeError):
        staged(C, b"e:", items)


def test_an_error_in_put_stops_the_pass():
    def put(_k: bytes, _v: bytes) -> None:
        raise RuntimeError("full")

    for stage in (C, PY):
        with pytest.raises(RuntimeError, match="full"):
            stage(put, print, b"e:", [("bag", b"a", b"1")])


def test_the_store_stages_in_c_unless_pure_python_is_asked_for():
    assert staging.stage_entries is C
    code = "from ivmstream.state import staging; print(staging.stage_entries is staging.py_stage_entries)"
    assert printed_in_child(code) == ["True"]
