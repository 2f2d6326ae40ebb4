"""The worker GC policy: what it changes while applied, that it undoes it, and that it leaks nothing."""

from __future__ import annotations

import gc
import weakref

import pytest

from ivmstream.runtime.gc_policy import YOUNG_THRESHOLD, worker_gc


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_policy_freezes_the_startup_heap_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    alive = [_Node() for _ in range(10)]  # tracked objects that exist when the policy starts
    with worker_gc() as frozen:
        assert frozen > len(alive)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        collectable = {id(o) for o in gc.get_objects()}  # frozen objects are out of every generation
        assert all(gc.is_tracked(o) and id(o) not in collectable for o in alive)
        made_later = _Node()
        assert id(made_later) in {id(o) for o in gc.get_objects()}
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_policy_is_undone_when_the_body_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), worker_gc(young_threshold=1234):
        assert gc.get_threshold()[0] == 1234
        raise RuntimeError("worker failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_under_the_policy_are_still_collected() -> None:
    with worker_gc():
        ref = _cycle()
        assert ref() is not None  # unreachable, but only the cyclic collector can free it
        gc.collect()
        assert ref() is None


def test_garbage_cycles_that_exist_at_start_are_collected_before_freezing() -> None:
    ref = _cycle()
    with worker_gc():
        assert ref() is None  # collected by the policy's own collection, not frozen forever


def test_young_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="young_threshold"), worker_gc(young_threshold=0):
        pass
