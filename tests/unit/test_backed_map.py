"""StoreBackedMap against a plain dict over random operation sequences with checkpoints: reads see the
last checkpoint plus the map's own writes, at most ``capacity`` clean entries stay resident, nothing
changed since the last checkpoint is ever evicted, and what the changes add up to is the map."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.backed_map import StoreBackedMap
from ivmstream.engine import StoredMap


class FakeStore:
    """What the runtime binds: committed entries only, written by ``commit`` (a checkpoint)."""

    def __init__(self) -> None:
        self.committed: dict[bytes, bytes] = {}
        self.reads = 0

    def get(self, key: bytes) -> bytes | None:
        self.reads += 1
        return self.committed.get(key)

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        yield from sorted(self.committed.items())

    def source(self) -> StoredMap:
        return StoredMap(self.get, self.scan)

    def commit(self, m: StoreBackedMap[int]) -> None:
        for name, k, v in m.changes():
            assert name == "m"
            if v is None:
                self.committed.pop(k, None)
            else:
                self.committed[k] = v


def new_map(capacity: int | None, store: FakeStore | None = None) -> StoreBackedMap[int]:
    m: StoreBackedMap[int] = StoreBackedMap("m", lambda v: str(v).encode(), int, capacity)
    if store is not None:
        m.attach(store.source())
    return m


keys = st.integers(0, 15).map(lambda i: b"k%d" % i)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("get"), keys, st.just(0)),
        st.tuples(st.just("put"), keys, st.integers(1, 9)),
        st.tuples(st.just("delete"), keys, st.just(0)),
        st.tuples(st.just("checkpoint"), st.just(b""), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=300)
@given(ops=ops, capacity=st.integers(1, 6))
def test_reads_see_writes_and_the_bound_holds_with_dirty_entries_never_evicted(ops, capacity):
    store = FakeStore()
    m = new_map(capacity, store)
    model: dict[bytes, int] = {}
    dirty: set[bytes] = set()  # keys written since the last checkpoint
    for op, key, value in ops:
        if op == "get":
            assert m.get(key) == model.get(key)
        elif op == "put":
            m.put(key, value)
            model[key] = value
            dirty.add(key)
        elif op == "delete":
            m.delete(key)
            model.pop(key, None)
            dirty.add(key)
        else:
            store.commit(m)
            dirty.clear()
            assert store.committed == {k: str(v).encode() for k, v in model.items()}
        assert m.dirty == len(dirty)
        assert m.resident <= max(capacity, len(dirty))
        # a dirty entry is answered from memory: no store read
        for k in dirty:
            before = store.reads
            assert m.get(k) == model.get(k)
            assert store.reads == before
    assert dict(m.items()) == model
    assert {k: v for _n, k, v in m.entries()} == {k: str(v).encode() for k, v in model.items()}
    store.commit(m)
    assert m.resident <= capacity


def test_lru_keeps_the_most_recently_used_and_counts_hits_misses_evictions():
    store = FakeStore()
    store.committed = {b"a": b"1", b"b": b"2", b"c": b"3"}
    m = new_map(2, store)
    assert m.get(b"a") == 1 and m.get(b"b") == 2  # two misses
    assert m.get(b"a") == 1  # a hit; b is now least recently used
    assert m.get(b"c") == 3  # a miss that evicts b
    reads = store.reads
    assert m.get(b"a") == 1 and store.reads == reads  # still cached
    assert m.get(b"b") == 2 and store.reads == reads + 1  # read again
    assert (m.hits, m.misses, m.evictions) == (2, 4, 2)
    assert m.resident == 2


def test_a_known_absence_is_cached_and_a_delete_hides_the_stored_value():
    store = FakeStore()
    store.committed = {b"a": b"1"}
    m = new_map(4, store)
    assert m.get(b"x") is None and m.get(b"x") is None
    assert store.reads == 1
    m.delete(b"a")
    assert m.get(b"a") is None and store.reads == 1
    assert list(m.items()) == []  # the store still holds it until the checkpoint
    store.commit(m)
    assert store.committed == {} and list(m.items()) == []
    assert m.get(b"a") is None and store.reads == 1  # the flushed delete is a cached absence


def test_without_a_store_everything_stays_resident_whatever_the_capacity():
    m = new_map(1)
    for i in range(10):
        m.put(b"%d" % i, i + 1)
    m.changes()
    assert m.resident == 10 and m.evictions == 0
    assert dict(m.items()) == {b"%d" % i: i + 1 for i in range(10)}
    m.delete(b"3")
    assert m.changes() == [("m", b"3", None)]
    assert m.resident == 9  # a delete without a store behind it keeps nothing


def test_replace_deletes_stored_entries_not_in_the_new_state():
    store = FakeStore()
    store.committed = {b"a": b"1", b"b": b"2"}
    m = new_map(1, store)
    m.replace([(b"b", 5), (b"c", 6)])
    assert sorted(m.items()) == [(b"b", 5), (b"c", 6)]
    store.commit(m)
    assert store.committed == {b"b": b"5", b"c": b"6"}


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        new_map(0)


@settings(max_examples=100)
@given(ops=ops, attached=st.booleans())
def test_batched_reads_and_writes_equal_one_at_a_time(ops, attached):
    """``get_many``/``put_many`` (an engine's batch of distinct members) against ``get``/``put``: the
    same values read, the same changes handed out, the same map."""
    stores = (FakeStore(), FakeStore()) if attached else (None, None)
    one, many = new_map(None, stores[0]), new_map(None, stores[1])
    for op, key, value in ops:
        wanted = [key, b"k%d" % (value % 16)]
        if op == "get":
            assert many.get_many(wanted) == [one.get(k) for k in wanted]
        elif op == "put":
            one.put(key, value)
            one.put(wanted[1], value + 1)
            many.put_many([(key, value), (wanted[1], value + 1)])
        elif op == "delete":
            one.delete(key)
            many.delete(key)
        else:
            changes = one.changes()
            assert sorted(many.changes()) == sorted(changes)
            if attached:
                for store in stores:
                    assert store is not None
                    store.committed.update({k: v for _n, k, v in changes if v is not None})
                    for _n, k, v in changes:
                        if v is None:
                            store.committed.pop(k, None)
    assert dict(many.items()) == dict(one.items())
