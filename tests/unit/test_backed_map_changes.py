"""A store-backed map's changes listed for a checkpoint (ivmstream.backed_map.entry_changes): the compiled
pass (shared/_backed_map.c) lists what its Python form lists, and what a brute-force walk of the dict
lists, on random maps of puts and deletes (runs of one value, distinct values, values that encode alike);
its tuples are left to reference counting; an encode that fails stops it; a StoreBackedMap hands out
the same changes either way and holds what a dict of the same puts and deletes holds; the map lists in
C unless IVMSTREAM_PURE_PYTHON=1."""

from __future__ import annotations

import gc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream import backed_map
from ivmstream.backed_map import StoreBackedMap
from tests.unit.extension_checks import printed_in_child, require_built

require_built(
    backed_map.compiled_entry_changes,
    "change listing",
    "ivmstream._backed_map",
    "shared/_backed_map.c",
)

C = backed_map.compiled_entry_changes
PY = backed_map.py_entry_changes
encode = b"%d".__mod__

dirty_maps = st.dictionaries(
    st.binary(max_size=4),
    st.one_of(st.none(), st.integers(-3, 3), st.integers(-(2**70), 2**70)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["bag", "", "ñ"]), dirty_maps)
def test_compiled_and_python_list_each_change_in_the_dicts_order(name, dirty):
    brute = [(name, k, None if v is None else b"%d" % v) for k, v in dirty.items()]
    assert C(name, dirty, encode) == PY(name, dirty, encode) == brute


def test_a_run_of_one_value_is_encoded_once_and_changes_are_left_to_reference_counting():
    calls: list[object] = []

    def counting(v: int) -> bytes:
        calls.append(v)
        return b"%d" % v

    big = 10**30  # one object, put under three keys
    dirty: dict[bytes, int | None] = {b"a": big, b"b": big, b"c": None, b"d": big, b"e": 1, b"f": big}
    out = C("bag", dirty, counting)
    assert out == PY("bag", dirty, encode)
    assert calls == [big, 1, big]  # a, b and d share one call (a delete ends no run), then 1, then big
    assert not any(gc.is_tracked(change) for change in out)


def test_a_value_encoded_as_a_container_stays_tracked():
    out = C("bag", {b"a": 1}, lambda v: [v])  # type: ignore[arg-type, return-value]
    assert out == [("bag", b"a", [1])] and gc.is_tracked(out[0])


def test_an_encode_that_fails_stops_the_pass():
    def failing(v: int) -> bytes:
        raise ValueError(f"cannot encode {v}")

    with pytest.raises(ValueError, match="cannot encode 2"):
        C("bag", {b"a": None, b"b": 2}, failing)
    with pytest.raises(TypeError):
        C(b"bag", {}, encode)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(st.lists(dirty_maps, min_size=1, max_size=3))
def test_a_store_backed_map_hands_out_the_same_changes_either_way(batches):
    maps = {}
    for form in (C, PY):
        kept, backed_map.entry_changes = backed_map.entry_changes, form
        try:
            bag: StoreBackedMap[int] = StoreBackedMap("bag", encode, int)
            handed = []
            for batch in batches:
                for k, v in batch.items():
                    if v is None:
                        bag.delete(k)
                    else:
                        bag.put(k, v)
                handed.append(bag.changes())
            maps[form] = (handed, sorted(bag.items()))
        finally:
            backed_map.entry_changes = kept
    assert maps[C] == maps[PY]
    brute: dict[bytes, int] = {}  # brute force: every put and delete applied to a dict in order
    for batch in batches:
        for k, v in batch.items():
            if v is None:
                brute.pop(k, None)
            else:
                brute[k] = v
    assert maps[C][1] == sorted(brute.items())


def test_the_map_lists_changes_in_c_unless_pure_python_is_asked_for():
    assert backed_map.entry_changes is C
    code = "from ivmstream import backed_map; print(backed_map.entry_changes is backed_map.py_entry_changes)"
    assert printed_in_child(code) == ["True"]
