"""Every state backend keeps the same contract: state changes, envelope and next offset land together,
per partition, in both layouts (whole snapshots and incremental entries)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.state import Envelope, MemoryStore, StateChanges, StateError, check_envelope, open_store

ENV = Envelope("svc", 1, {"mode": "x"}).to_bytes()


@pytest.fixture(params=["memory", "rocksdb", "redis"])
def reopen(request, tmp_path, redis_server, unique):
    """A factory opening the same store again (a restarted worker); memory stays in one object."""
    memory = MemoryStore()

    def factory(fault_hook=None):
        if request.param == "memory":
            return memory
        return open_store(
            request.param, unique, state_dir=tmp_path, redis_url=redis_server.url, fault_hook=fault_hook
        )

    return factory


def snaps(**kv: bytes) -> StateChanges:
    return StateChanges(snapshots=dict(kv))


def test_snapshot_layout_contract(reopen):
    store = reopen()
    first = store.load("in", 0)
    assert first.empty and first.envelope is None
    assert store.commit("in", 0, 10, snaps(k1=b"a", k2=b"bb"), ENV).bytes == 3
    assert store.commit("in", 0, 25, snaps(k1=b"ccc"), ENV).bytes == 3
    store.commit("in", 1, 4, snaps(k1=b"other partition"), ENV)
    store.commit("in", 0, 30, StateChanges(), ENV)  # progress with no state change (only rejected events)
    store.release("in", 0)
    store.release("in", 1)
    store.close()

    again = reopen()
    p0, p1 = again.load("in", 0), again.load("in", 1)
    assert p0.offset == 30 and p0.snapshots == {"k1": b"ccc", "k2": b"bb"} and p0.envelope == ENV
    assert p1.offset == 4 and p1.snapshots == {"k1": b"other partition"}
    assert again.load("other-topic", 0).offset is None
    again.close()


def test_entry_layout_puts_deletes_and_conversion(reopen):
    store = reopen()
    store.commit("in", 0, 5, snaps(a=b"whole"), ENV)
    first = StateChanges(
        entries={"a": [("rel", b"x", b"1"), ("rel", b"y", b"2"), ("meta", b"q", b"9")]},
        drop_snapshots={"a"},
    )
    first.entries["b"] = [("rel", b"x", b"other key")]
    assert store.commit("in", 0, 8, first, ENV).entries == 4
    store.commit("in", 0, 9, StateChanges(entries={"a": [("rel", b"x", None), ("rel", b"z", b"3")]}), ENV)
    store.close()

    cp = reopen().load("in", 0)
    assert cp.offset == 9 and cp.snapshots == {}
    assert sorted(cp.entries["a"]) == [("meta", b"q", b"9"), ("rel", b"y", b"2"), ("rel", b"z", b"3")]
    assert cp.entries["b"] == [("rel", b"x", b"other key")]


def test_keys_with_separators_and_unicode_round_trip(reopen):
    store = reopen()
    keys = {"": b"0", "a:b/c": b"1", "ключ": b"2", "k:\x00": b"3"}
    store.commit("in", 0, 1, StateChanges(snapshots=keys), ENV)
    entries = {k: [("m", b"\x00e:" + v, v)] for k, v in keys.items()}
    store.commit("in", 1, 1, StateChanges(entries=entries), ENV)
    store.close()
    again = reopen()
    assert again.load("in", 0).snapshots == keys
    assert again.load("in", 1).entries == {k: [(m, e, v)] for k, [(m, e, v)] in entries.items()}


class Crash(Exception):
    pass


@pytest.mark.parametrize("backend", ["rocksdb", "redis"])
def test_crash_while_a_checkpoint_is_being_written_leaves_the_previous_one_whole(
    backend, tmp_path, redis_server, unique
):
    """The store stages the whole checkpoint, then dies before writing it: nothing of it may land."""

    def reopen(fault_hook=None):
        return open_store(
            backend, unique, state_dir=tmp_path, redis_url=redis_server.url, fault_hook=fault_hook
        )

    store = reopen()
    store.commit("in", 0, 3, StateChanges(entries={"a": [("m", b"1", b"one")]}), ENV)
    store.close()

    def crash(point: str) -> None:
        if point == "checkpoint-staged":
            raise Crash(point)

    dying = reopen(fault_hook=crash)
    big = StateChanges(entries={"a": [("m", b"1", None)] + [("m", b"%d" % i, b"v") for i in range(2, 5000)]})
    with pytest.raises(Crash):
        dying.commit("in", 0, 99, big, ENV)
    dying.close()
    cp = reopen().load("in", 0)
    assert cp.offset == 3 and cp.entries == {"a": [("m", b"1", b"one")]}


@settings(max_examples=40)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["k1", "k2"]),
                st.sampled_from(["m", "n"]),
                st.binary(max_size=3),
                st.one_of(st.none(), st.binary(max_size=4)),
            ),
            max_size=12,
        ),
        max_size=6,
    )
)
def test_stored_entries_equal_the_changes_replayed_on_a_dict(batches):
    """Any sequence of change lists (puts and deletes, the same entry several times) stores what a
    plain dict that applied them holds."""
    store = MemoryStore()
    model: dict[tuple[str, str, bytes], bytes] = {}
    for offset, batch in enumerate(batches, 1):
        changes = StateChanges()
        for key, m, e, v in batch:
            changes.entries.setdefault(key, []).append((m, e, v))
            if v is None:
                model.pop((key, m, e), None)
            else:
                model[(key, m, e)] = v
        store.commit("t", 0, offset, changes, ENV)
    cp = store.load("t", 0)
    assert {(k, m, e): v for k, items in cp.entries.items() for m, e, v in items} == model


def test_envelope_refuses_state_of_another_engine_in_one_line():
    theirs = Envelope("triangles", 1, {"strategy": "first-order"})
    ours = Envelope("triangles", 1, {"strategy": "ivm-eps"})
    check_envelope(ours.to_bytes(), ours, "here", has_state=True)
    check_envelope(None, ours, "here", has_state=False)
    with pytest.raises(StateError) as err:
        check_envelope(theirs.to_bytes(), ours, "the rocksdb state of in:0", has_state=True)
    msg = str(err.value)
    assert "\n" not in msg and '"first-order"' in msg and '"ivm-eps"' in msg and "in:0" in msg
    with pytest.raises(StateError, match=r"state v1 .* state v2"):
        check_envelope(ours.to_bytes(), Envelope("triangles", 2, ours.options), "x", has_state=True)
    with pytest.raises(StateError, match="without a checkpoint envelope"):
        check_envelope(None, ours, "x", has_state=True)


def test_unknown_backend_and_redis_without_url():
    with pytest.raises(StateError, match="unknown state backend"):
        open_store("leveldb", "x")
    with pytest.raises(StateError, match="needs --redis"):
        open_store("redis", "x")


def test_single_key_reads_equal_the_whole_partition_load(reopen):
    """``KeyLoader``: the header, the key list and each key's state read one at a time are what a whole
    load reads, in both layouts, after deletes, conversions and keys with awkward bytes."""
    store = reopen()
    store.commit("in", 0, 3, snaps(a=b"whole a", b=b"whole b", **{"k:\x00": b"odd"}), ENV)
    changes = StateChanges(
        entries={
            "a": [("rel", b"x", b"1"), ("meta", b"m", b"9")],
            "ключ": [("rel", b"\xff\x00", b"2")],
            "gone": [("rel", b"x", b"3")],
            "a\xff": [("rel", b"y", b"4")],
        },
        drop_snapshots={"a"},
        broadcast_offset=7,
    )
    store.commit("in", 0, 8, changes, ENV)
    store.commit("in", 0, 9, StateChanges(entries={"gone": [("rel", b"x", None)]}), ENV)
    store.close()

    again = reopen()
    whole = again.load("in", 0)
    header = again.load_header("in", 0)
    assert (header.offset, header.envelope, header.broadcast_offset) == (9, ENV, 7)
    assert not header.snapshots and not header.entries
    listed = again.stored_keys("in", 0)
    assert listed == sorted(listed)
    assert set(whole.snapshots) | set(whole.entries) <= set(listed)
    for key in listed:
        snapshot, entries = again.load_key("in", 0, key)
        assert snapshot == whole.snapshots.get(key)
        assert sorted(entries) == sorted(whole.entries.get(key, []))
        _, kept = again.load_key("in", 0, key, skip_maps={"meta"})
        assert sorted(kept) == sorted(e for e in whole.entries.get(key, []) if e[0] != "meta")
    assert again.load_key("in", 0, "never stored") == (None, [])
    assert again.load_header("in", 5).offset is None and again.stored_keys("in", 5) == []
    # point lookups and the count agree with the listing, for listed keys, prefixes and strangers
    asked = [*listed, "never stored", "a\x00", "", "k:", "gone\xff", *(k[:-1] for k in listed if k)]
    assert again.has_keys("in", 0, asked) == [k in listed for k in asked]
    assert again.has_keys("in", 0, []) == [] and again.has_keys("in", 5, ["a"]) == [False]
    assert again.count_keys("in", 0) == len(listed) and again.count_keys("in", 5) == 0
