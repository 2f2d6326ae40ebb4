"""What the reservoir's two compiled-kernel test modules (the rounded re-weighing, the exact counts) share:
the query shapes and a (compiled, Python) pair of indexes over one, two engines run on one stream, and
the IVMSTREAM_PURE_PYTHON switch probed in child processes."""

from __future__ import annotations

import random
from typing import Any

from ivmstream.services.reservoir.engine import ReservoirEngine
from ivmstream.services.reservoir.index import JoinIndex
from ivmstream.services.reservoir.query import Query, parse_query
from tests.unit.extension_checks import printed_in_child
from tests.unit.reservoir.oracle import BRANCH, LINE3, STAR3, TWO_TABLE, engine, event, options

SHAPES: dict[str, dict[str, Any]] = {"line3": LINE3, "two": TWO_TABLE, "star3": STAR3, "branch": BRANCH}


def index_pair(
    shape: str, grouped: bool, *, exact: bool, slot: str, native: Any
) -> tuple[JoinIndex, JoinIndex, Query]:
    """(compiled, Python) indexes over one query: the kernel in the first's `slot`, None in the other's."""
    q = parse_query(options(SHAPES[shape]))

    def make() -> JoinIndex:
        return JoinIndex([n.attrs for n in q.nodes], q.neighbours(), q.columns, exact=exact, grouped=grouped)

    compiled, python = make(), make()
    setattr(compiled, slot, native)
    setattr(python, slot, None)
    return compiled, python, q


def engines_on_one_stream(
    query: dict[str, Any], strategy: str, seed: int, slot: str
) -> list[ReservoirEngine]:
    """Two engines with the same seed, the second on the Python steps (its index's `slot` None), after the
    same stream: 300 random inserts, then deletes of every third tuple each kept."""
    rng = random.Random(seed)
    engines = [engine(query, strategy=strategy, k=8, seed=3) for _ in range(2)]
    setattr(engines[1].index, slot, None)
    assert getattr(engines[0].index, slot) is not None
    rels = list(engines[0].query.bases.items())
    stream = []
    for _ in range(300):
        rel, cols = rng.choice(rels)
        stream.append(event(rel, cols, [rng.randrange(6) for _ in cols]))
    for e in engines:
        rejected = {r.index for r in e.apply(stream)}
        kept = [ev for i, ev in enumerate(stream) if i not in rejected]
        e.apply([event(ev.relation, list(ev.row), list(ev.row.values()), -1) for ev in kept[::3]])
    return engines


def pure_python_switch(probe: str) -> dict[str, list[str]]:
    """What `probe` prints in a child process with IVMSTREAM_PURE_PYTHON=1 and with it 0, as words."""
    return {flag: printed_in_child(probe, flag) for flag in ("1", "0")}
