"""The engine's compiled run of plain inserts (services/reservoir/_arrivals.c, ``insert_run``, with
``Reservoir.update``'s skip in it) leaves an engine exactly as its Python steps
(``ReservoirEngine._apply_event``, sampler.py) do: on random streams of inserts, duplicates, deletes
and malformed deltas, cut into random batches, with the checkpoint log on or off, a pending skip
forged long (beyond 2^62 and beyond 64 bits),
on every sampling strategy the run takes (with and without replacement, with a predicate, a self-join's
aliases) and on those it leaves to Python (bags, declared keys, SJoin's exact counts), the two engines
give the same rejections, relations, log, counters, index, generator state, sample and checkpoint
entries, and their sample is drawn from the brute-force join."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.sdk import UpdateEvent
from ivmstream.services.reservoir import engine as engine_module
from ivmstream.services.reservoir import kernels
from tests.unit.reservoir.kernel_checks import pure_python_switch
from tests.unit.reservoir.oracle import DUMBBELL, FK_MERGE, LINE3, STAR3, brute_join, engine

BUILD = "not built: `make setup` compiles services/reservoir/_arrivals.c into the reservoir kernels"

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "line3 rsjoin": (LINE3, {"strategy": "rsjoin"}),
    "star3 rsjoin-opt": (STAR3, {"strategy": "rsjoin-opt"}),
    "star3 with replacement": (STAR3, {"strategy": "rsjoin", "with_replacement": True}),
    "line3 predicate": (LINE3, {"strategy": "rsjoin", "predicate": "a < d"}),
    "dumbbell bags": (DUMBBELL, {"strategy": "rsjoin"}),
    "fk keys": (FK_MERGE, {"strategy": "rsjoin"}),
    "star3 sjoin": (STAR3, {"strategy": "sjoin"}),
}


def snapshot(e: Any) -> list[Any]:
    """Everything an event can change, with every dict's order."""
    sampler = e.sampler
    return [
        [list(rel.items()) for rel in e.rels.values()],
        list(e._log.items()),
        e.rel_seq,
        dict(e.counters),
        e.known_size,
        e.rng.getstate(),
        sampler.state(),
        e.index.dump_directed(),
        [list(node.tuples.items()) for node in e.index.nodes],
        e.index.places,
        sorted(e.index.dirty, key=repr),
    ]


@st.composite
def streams(draw: Any, bases: list[tuple[str, tuple[str, ...]]]) -> list[UpdateEvent]:
    """Events over a small domain: mostly inserts (so duplicates and join results abound), some deletes
    (of present and absent tuples), and deltas a set refuses (0, 2, True, 1.0)."""
    events = []
    for _ in range(draw(st.integers(1, 60))):
        rel, cols = draw(st.sampled_from(bases))
        values = [draw(st.integers(0, 3)) for _ in cols]
        delta = draw(st.sampled_from([1] * 8 + [-1, -1, 0, 2, True, 1.0]))
        events.append(UpdateEvent(rel, dict(zip(cols, values, strict=True)), delta))
    return events


@pytest.mark.parametrize("case", sorted(CASES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_run_leaves_the_engine_as_the_python_steps_do(case: str, data: Any):
    assert engine_module._insert_run is not None, BUILD
    query, more = CASES[case]
    seed = data.draw(st.integers(0, 3))
    compiled, python = (engine(query, k=4, seed=seed, **more) for _ in range(2))
    stream = data.draw(streams(list(compiled.query.bases.items())))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    checkpoint_at = data.draw(st.sampled_from([None, *cuts]))
    # a pending skip forged after the first batch: long ones, past 2^62 and past 64 bits
    forged_q = data.draw(st.sampled_from([None, 0, 1, 7, 2**62 + 3, 2**63 - 1, 2**70]))
    done: list[Any] = [[], []]
    for side, e in enumerate((compiled, python)):
        with pytest.MonkeyPatch.context() as m:
            if e is python:
                m.setattr(engine_module, "_insert_run", None)
            start = 0
            for cut in [*cuts, len(stream)]:
                if cut == checkpoint_at:  # the log on from here (the worker's first checkpoint)
                    done[side].append([(m_, k, v) for m_, k, v in e.all_entries()])
                batch = stream[start:cut]
                done[side].append(list(e.apply(batch)))
                done[side].append(snapshot(e))
                if start == 0 and forged_q is not None and hasattr(e.sampler, "q"):
                    e.sampler.q = forged_q
                start = cut
            done[side].append(e.changed_entries() if e._logging else list(e.all_entries()))
            done[side].append(e.result())
    assert done[0] == done[1]
    assert set(compiled.rows()) <= brute_join(compiled)


def test_the_run_takes_plain_inserts_and_stops_at_the_first_event_it_must_judge():
    """The plan exists for a sampling engine on the compiled index; the run returns where it stopped."""
    assert kernels.compiled is not None, BUILD
    e = engine(LINE3, strategy="rsjoin", k=4, seed=1)
    plan = e._insert_plan()
    assert plan is not None
    events = [
        UpdateEvent("E", {"src": 1, "dst": 2}, 1),
        UpdateEvent("E", {"src": 2, "dst": 3}, 1),
        UpdateEvent("E", {"src": 1, "dst": 2}, 1),  # a duplicate: the engine's to refuse
        UpdateEvent("E", {"src": 3, "dst": 4}, 1),
    ]
    stop, sized = kernels.compiled.insert_run(e, events, 0, plan)
    assert (stop, sized) == (2, True)
    assert e.counters["events"] == 2 and e.counters["inserts"] == 6 and e.rel_seq == 6
    assert kernels.compiled.insert_run(e, events, 3, plan) == (4, True)
    assert engine(STAR3, strategy="symhj", k=4)._insert_plan() is None
    assert engine(FK_MERGE, strategy="rsjoin", k=4)._insert_plan() is None


def test_pure_python_switch_leaves_every_event_to_the_python_steps():
    """IVMSTREAM_PURE_PYTHON=1 turns the compiled run off with the other compiled steps."""
    probe = "from ivmstream.services.reservoir import engine; print(engine._insert_run is None)"
    assert pure_python_switch(probe) == {"1": ["True"], "0": ["False"]}
