"""Every state backend keeps the same contract: snapshots and next offset land together, per partition."""

from __future__ import annotations

import pytest

from shared.state import MemoryStore, StateError, open_store


@pytest.fixture(params=["memory", "rocksdb", "redis"])
def reopen(request, tmp_path, redis_server, unique):
    """A factory opening the same store again (a restarted worker); memory stays in one object."""
    memory = MemoryStore()

    def factory():
        if request.param == "memory":
            return memory
        return open_store(request.param, unique, state_dir=tmp_path, redis_url=redis_server.url)

    return factory


def test_contract(reopen):
    store = reopen()
    assert store.load("in", 0).offset is None and store.load("in", 0).snapshots == {}
    assert store.commit("in", 0, 10, {"k1": b"a", "k2": b"bb"}) == 3
    assert store.commit("in", 0, 25, {"k1": b"ccc"}) == 3
    store.commit("in", 1, 4, {"k1": b"other partition"})
    store.commit("in", 0, 30, {})  # progress with no state change (only rejected events, say)
    store.release("in", 0)
    store.release("in", 1)
    store.close()

    again = reopen()
    p0, p1 = again.load("in", 0), again.load("in", 1)
    assert p0.offset == 30 and p0.snapshots == {"k1": b"ccc", "k2": b"bb"}
    assert p1.offset == 4 and p1.snapshots == {"k1": b"other partition"}
    assert again.load("other-topic", 0).offset is None
    again.close()


def test_keys_with_separators_and_unicode_round_trip(reopen):
    store = reopen()
    keys = {"": b"0", "a:b/c": b"1", "ключ": b"2", "k:\x00": b"3"}
    store.commit("in", 0, 1, keys)
    store.close()
    assert reopen().load("in", 0).snapshots == keys


def test_unknown_backend_and_redis_without_url():
    with pytest.raises(StateError, match="unknown state backend"):
        open_store("leveldb", "x")
    with pytest.raises(StateError, match="needs --redis"):
        open_store("redis", "x")
