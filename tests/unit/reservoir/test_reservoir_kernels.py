"""The compiled steps of the rounded join index (services/reservoir/_kernels.c: an insert, the
re-weighing it makes, an insert's virtual batch size) leave every container exactly as their Python
reference (``JoinIndex.insert``, ``_reweigh``, ``delta_size`` and the methods they call) does: the
key records (counts, rounded counts, buckets in order, sorted exponents), the positions, the
changed-key log and the work counters, after every insert and delete, on every query shape, plain and
grouped; weights beyond 64 bits included. An engine on the compiled steps draws the same sample as one
on the Python steps."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.reservoir import kernels
from ivmstream.services.reservoir.index import BUCKETS, CNT, EXPS, RCNT, WHERE, JoinIndex
from tests.unit.extension_checks import require_built
from tests.unit.reservoir.kernel_checks import (
    SHAPES,
    engines_on_one_stream,
    index_pair,
    pure_python_switch,
)
from tests.unit.reservoir.oracle import DUMBBELL, LINE3, STAR3, engine, event

require_built(
    kernels.compiled,
    "reservoir kernels",
    "ivmstream.services.reservoir._kernels",
    "services/reservoir/_kernels.c",
)


def pair(shape: str, grouped: bool) -> tuple[JoinIndex, JoinIndex, Any]:
    """(compiled, Python) rounded indexes over the same query."""
    return index_pair(shape, grouped, exact=False, slot="native", native=kernels.compiled)


def state(ix: JoinIndex) -> list[Any]:
    """Everything an insert writes, with every dict's and list's order: the node stores (tuples and
    arrival numbers, groups, key -> items maps) and every structure's key records."""
    out: list[Any] = [ix.places, ix.propagations, sorted(ix.dirty, key=repr)]
    for n in ix.nodes:
        keyed = {c: [(v, list(items.items())) for v, items in by.items()] for c, by in n.by_key.items()}
        out.append((list(n.tuples.items()), list(n.items.items()), keyed, n.next_seq))
    for d in ix.ds:
        out.append(
            [(v, r[CNT], r[RCNT], r[BUCKETS], r[EXPS], list(r[WHERE].items())) for v, r in d.recs.items()]
        )
    return out


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_reweighing_leaves_the_index_as_the_python_steps_do(shape: str, grouped: bool, data: Any):
    """Random inserts and deletes over a small domain (duplicates of keys, skewed by the domain size,
    rounded counts crossing powers of two both ways), the changed-key log on or off, and optionally a
    child's rounded count forged beyond 64 bits in both indexes (the products and sums then run on
    Python's integers): the two indexes agree after every step."""
    compiled, python, q = pair(shape, grouped)
    track = data.draw(st.booleans())
    compiled.tracking = python.tracking = track
    domain = data.draw(st.integers(2, 4))
    if data.draw(st.booleans()):  # a huge rounded count under one key of a leaf structure
        leaf = next(d for d in compiled.ds if not d.children and d.parent >= 0)
        v = tuple(data.draw(st.integers(0, domain - 1)) for _ in leaf.key_pos)
        for ix in (compiled, python):
            ix.ds[leaf.idx].recs[v] = [0, 2**70, [], [], {}]
    present: list[tuple[int, tuple[int, ...]]] = []
    for _ in range(data.draw(st.integers(1, 40))):
        if present and data.draw(st.integers(0, 2)) == 0:
            e, t = present.pop(data.draw(st.integers(0, len(present) - 1)))
            assert compiled.remove(e, t) and python.remove(e, t)
        else:
            e = data.draw(st.integers(0, len(q.nodes) - 1))
            t = tuple(data.draw(st.integers(0, domain - 1)) for _ in q.nodes[e].attrs)
            if data.draw(st.booleans()):  # the insert and its batch's size in one call, or two
                sized = compiled.insert_sized(e, t)
                assert python.insert_sized(e, t) == sized
                added = sized is not None
                assert sized is None or sized == python.delta_size(e, t)
            else:
                added = compiled.insert(e, t)
                assert python.insert(e, t) == added
            if added:
                present.append((e, t))
                size, radices = python.delta_size(e, t)
                assert compiled.delta_size(e, t) == (size, radices)  # the virtual batch, entry by entry
                entries = range(size) if size <= 64 else [0, 1, size // 2, size - 2, size - 1]
                for z in entries:
                    assert compiled.delta_get(e, t, radices, z) == python.delta_get(e, t, radices, z)
                assert compiled.retrieves == python.retrieves
        assert state(compiled) == state(python)


@pytest.mark.parametrize("strategy", ["rsjoin", "rsjoin-opt"])
@pytest.mark.parametrize("query", [LINE3, STAR3, DUMBBELL], ids=["line3", "star3", "dumbbell"])
def test_an_engine_on_the_compiled_steps_draws_the_same_sample(query: dict[str, Any], strategy: str):
    """Same seed, same stream (inserts, then deletes of a third of the tuples): the same sample, the
    same generator state, the same snapshot of the index."""
    done: list[Any] = []
    for e in engines_on_one_stream(query, strategy, 5, "native"):
        done.append((e.sampler.rows(), e.rng.getstate(), e.index.dump_directed(), e.index.places))
    assert done[0] == done[1]
    assert done[0][0]  # a non-empty sample was compared


def test_pure_python_switch_turns_the_compiled_steps_off():
    """IVMSTREAM_PURE_PYTHON=1 gives the Python steps (as for the event decoder); unset, the compiled."""
    probe = "from ivmstream.services.reservoir import kernels; print(kernels.ACTIVE, kernels.native is None)"
    runs = pure_python_switch(probe)
    assert runs == {"1": ["python", "True"], "0": ["compiled", "False"]}


ATOMS = st.one_of(st.integers(), st.text(max_size=4), st.floats(allow_nan=False), st.none(), st.booleans())
VALUES = st.one_of(
    ATOMS, st.tuples(ATOMS), st.lists(ATOMS, max_size=2), st.tuples(st.lists(ATOMS, max_size=1))
)


@settings(max_examples=200, deadline=None)
@given(row=st.dictionaries(st.sampled_from("abcd"), VALUES, min_size=1), data=st.data())
def test_compiled_projection_builds_the_python_tuple_untracked_when_it_holds_atoms(
    row: dict[str, Any], data: Any
):
    """``project`` gives ``tuple(row[c] for c in columns)``, as the engine's Python projection does, and
    stops the collector tracking it exactly when nothing in it is tracked (atoms, and tuples the collector
    no longer tracks): a tuple holding a list stays tracked."""
    from ivmstream.services.reservoir.engine import _project

    columns = tuple(data.draw(st.lists(st.sampled_from(sorted(row)), min_size=1, max_size=4)))
    got = kernels.compiled.project(row, columns)
    assert got == _project(row, columns)
    assert type(got) is tuple
    # a tuple inside counts as an atom once the collector has stopped tracking it
    assert gc.is_tracked(got) == any(gc.is_tracked(x) for x in got)
    if any(isinstance(x, list) for x in got):
        assert gc.is_tracked(got)
    with pytest.raises(KeyError):
        kernels.compiled.project(row, ("absent",))


def test_the_compiled_steps_keep_the_index_dicts_out_of_the_collectors_sight():
    """After a stream of inserts through an engine on the compiled steps, the dicts keyed by tuples (the
    relations, the node stores, every structure's key records and positions) hold only
    untracked keys and values, so they are untracked themselves: a young collection never walks them.
    On the Python steps the same dicts are re-tracked by every fresh key (the layout the kernels fix)."""
    rng = random.Random(11)
    e = engine(LINE3, strategy="rsjoin", k=8, seed=3)
    assert e.index.native is not None
    cols = e.query.bases["E"]
    e.apply([event("E", cols, [rng.randrange(40), rng.randrange(40)]) for _ in range(400)])
    ix = e.index
    dicts: list[dict[Any, Any]] = [*e.rels.values(), *(n.tuples for n in ix.nodes)]
    assert all(n.whole and not n.items for n in ix.nodes)  # rsjoin: every item its one tuple
    dicts += [d.recs for d in ix.ds]
    assert all(len(x) for x in dicts)
    assert not any(gc.is_tracked(x) for x in dicts)


@pytest.mark.parametrize("grouped", [False, True])
def test_the_compiled_steps_keep_the_per_key_containers_out_of_the_collectors_sight(grouped: bool):
    """The containers a compiled insert fills, one or more per key and per group (each key's record,
    its exponent buckets and their item lists, the sorted exponents, a node's groups and its key ->
    items maps), hold only settled tuples, ints and one another, so no reference cycle runs through
    them: the kernel takes them off the collector's watch, and a full collection does not walk the
    index. Deletes (on the Python steps) and collections then leave the index as the Python steps do."""
    compiled, python, q = pair("line3", grouped)
    rng = random.Random(5)
    stream = [(e, tuple(rng.randrange(6) for _ in q.nodes[e].attrs)) for e in rng.choices(range(3), k=300)]
    for e, t in stream:
        for ix in (compiled, python):
            ix.insert(e, t)
    containers: list[Any] = []
    for d in compiled.ds:
        records = list(d.recs.values())
        containers += [d.recs, *records, *(rec[BUCKETS] for rec in records), *(rec[EXPS] for rec in records)]
        containers += [rec[WHERE] for rec in records]
        containers += [arr for rec in records for arr in rec[BUCKETS] if arr is not None]
    for n in compiled.nodes:
        containers += [*n.by_key.values(), *(m for keyed in n.by_key.values() for m in keyed.values())]
        containers += [n.items, *(g for g in n.items.values() if isinstance(g, list))]
    assert len(containers) > 100
    assert not any(gc.is_tracked(x) for x in containers)
    for i, (e, t) in enumerate(rng.sample(stream, 150)):
        assert compiled.remove(e, t) == python.remove(e, t)
        if i % 50 == 0:
            gc.collect()
        assert state(compiled) == state(python)
