"""The generated delta plans (``codegen.py``) against the expression closures they are generated from,
and against brute force.

Expressions: random texts of the whole language over rows holding nulls, zeros of both signs, floats,
booleans and texts give the same value (same type, same ``repr``: the same float rounding and the same
signed zero) or raise the same exception (a text added to a number) as the closures. Engines: random
queries (one to three relations sharing variables, a random predicate's conjuncts, random aggregates,
random group-by variables) under random streams of inserts, deletes, duplicates and refused deletes:
after every update the generated engine's snapshot is byte-identical to the interpreted engine's, the
work counters and refusals agree, and the groups equal a nested-loop join of the bags evaluated by the
closures. Restores (whole snapshots and incremental entries) rebind the generated plans to the restored
bags."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent
from ivmstream.services.firstorder.codegen import expression_function
from ivmstream.services.firstorder.engine import FirstOrderEngine, RecomputeEngine
from ivmstream.services.firstorder.expressions import compile_expression
from ivmstream.services.firstorder.plan import Query

CONSTANTS = ["0", "1", "2", "0.5", "-0.0", "1e999", "None", "'x'", "'q\"u\\'o'"]
LISTED = ["0", "1", "2.5", "None", "'x'"]


def expressions(variables: list[str], texts: bool = True) -> st.SearchStrategy[str]:
    """Texts of the language over ``variables`` (numbers and conditions mixed, as the language allows);
    ``texts=False``: no text constants and no infinity (sums stay finite numbers, as state stores them)."""
    constants = CONSTANTS if texts else [c for c in CONSTANTS if "'" not in c and c != "1e999"]
    listed = LISTED if texts else [c for c in LISTED if "'" not in c]
    members = st.sampled_from(listed)
    leaves = st.one_of(st.sampled_from(variables), st.sampled_from(constants))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        ops = st.sampled_from(["+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!="])
        cmp = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
        return st.one_of(
            st.tuples(inner, ops, inner).map(lambda t: f"({' '.join(t)})"),
            st.tuples(inner, cmp, inner, cmp, inner).map(lambda t: f"({' '.join(t)})"),
            st.tuples(st.sampled_from(["-", "+", "not "]), inner).map(lambda t: f"({t[0]}{t[1]})"),
            st.tuples(inner, st.sampled_from(["in", "not in"]), st.lists(members, min_size=1)).map(
                lambda t: f"({t[0]} {t[1]} ({', '.join(t[2])},))"
            ),
            st.tuples(st.sampled_from([" and ", " or "]), st.lists(inner, min_size=2, max_size=3)).map(
                lambda t: "(" + t[0].join(t[1]) + ")"
            ),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(st.sampled_from(["min", "max"]), st.lists(inner, min_size=1, max_size=3)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
        )

    return st.recursive(leaves, extend, max_leaves=8)


ROW_VALUES = [None, 0, 1, -1, 0.5, -0.0, 2.5, True, "x", "y"]
POSITION = {"a": 0, "b": 1, "c": 2}


def _outcome(fn: Callable[[Any], Any], env: Any) -> tuple[Any, ...]:
    try:
        value = fn(env)
    except Exception as exc:  # the same failure is part of the same meaning
        return ("raised", type(exc))
    return ("value", type(value), repr(value))


@settings(max_examples=200, deadline=None)
@given(text=expressions(list(POSITION)), rows=st.lists(st.tuples(*[st.sampled_from(ROW_VALUES)] * 3)))
def test_generated_expressions_equal_the_closures(text: str, rows: list[tuple[Any, ...]]) -> None:
    closure = compile_expression(text, POSITION).fn
    generated = expression_function(text, POSITION)
    for row in rows:
        assert _outcome(generated, row) == _outcome(closure, row), (text, row)


# --- engines ------------------------------------------------------------------------------------

VARIABLES = ["k", "j", "x", "y"]
VALUES = [None, 0, 1, 2, 0.5, -1]


@st.composite
def queries(draw: st.DrawFn) -> Query:
    count = draw(st.integers(1, 3))
    relations: dict[str, dict[str, str]] = {}
    for i in range(count):
        cols = draw(st.lists(st.sampled_from(VARIABLES), min_size=1, max_size=3, unique=True))
        relations[f"r{i}"] = dict.fromkeys(cols, "float")
    used = sorted({c for cols in relations.values() for c in cols})
    numbers = expressions(used, texts=False)
    predicate = draw(
        st.one_of(st.none(), numbers, st.lists(numbers, min_size=2, max_size=3).map(" and ".join))
    )
    aggregates = draw(st.lists(numbers, max_size=2))
    free = draw(st.lists(st.sampled_from(used), max_size=2, unique=True))
    return Query(relations, free, predicate, {f"s{i}": a for i, a in enumerate(aggregates)})


@st.composite
def streams(draw: st.DrawFn, query: Query) -> list[tuple[str, tuple[Any, ...], int]]:
    held: Counter[tuple[str, tuple[Any, ...]]] = Counter()
    out = []
    for _ in range(draw(st.integers(1, 25))):
        live = sorted((k for k, m in held.items() if m > 0), key=repr)
        deleting = draw(st.booleans())
        if live and deleting:
            rel, tup = draw(st.sampled_from(live))
            delta = -draw(st.integers(1, held[(rel, tup)] + 1))  # one more than held: refused
        else:
            rel = draw(st.sampled_from(sorted(query.relations)))
            tup = tuple(draw(st.sampled_from(VALUES)) for _ in query.relations[rel])
            delta = draw(st.sampled_from([1, 1, 2]))
        if held[(rel, tup)] + delta >= 0:
            held[(rel, tup)] += delta
        out.append((rel, tup, delta))
    return out


def brute_force(query: Query, bags: dict[str, Counter[tuple[Any, ...]]]) -> dict[tuple[Any, ...], list[Any]]:
    """Every combination of the bags' tuples agreeing on shared variables, tested and summed by the
    closures."""
    out: dict[tuple[Any, ...], list[Any]] = {}
    names = list(query.relations)
    for combo in itertools.product(*(list(bags[r].items()) for r in names)):
        env: list[Any] = [None] * len(query.variables)
        seen: set[int] = set()
        mult, consistent = 1, True
        for rel, (tup, m) in zip(names, combo, strict=True):
            for col, value in zip(query.relations[rel], tup, strict=True):
                pos = query.position[col]
                if pos in seen and env[pos] != value:
                    consistent = False
                seen.add(pos)
                env[pos] = value
            mult *= m
        if not consistent or not all(c.fn(env) for c in query.conjuncts):
            continue
        acc = out.setdefault(tuple(env[p] for p in query.free_env), [0] * (1 + len(query.aggregates)))
        acc[0] += mult
        for i, agg in enumerate(query.aggregates, 1):
            if (v := agg.fn(env)) is not None:
                acc[i] += mult * v
    return {k: a for k, a in out.items() if a[0]}


def _close(got: dict[Any, list[Any]], want: dict[Any, list[Any]]) -> bool:
    def same(a: Any, b: Any) -> bool:
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
            return math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)

    return got.keys() == want.keys() and all(
        len(got[k]) == len(want[k]) and all(same(a, b) for a, b in zip(got[k], want[k], strict=True))
        for k in want
    )


def _apply(engine: FirstOrderEngine, rel: str, tup: tuple[Any, ...], delta: int) -> list[Any]:
    row = dict(zip(engine.query.relations[rel], tup, strict=True))
    return [(r.index, r.code) for r in engine.apply([UpdateEvent(rel, row, delta)])]


def _restored(engine: FirstOrderEngine, by_entries: bool) -> FirstOrderEngine:
    """A copy restored from a whole snapshot or from the checkpoint entries, its counters carried over."""
    copy = FirstOrderEngine(engine.query, generated=bool(engine._deltas))
    if by_entries:
        copy.restore_entries(list(engine.all_entries()))
    else:
        copy.restore(engine.snapshot())
        copy.all_entries()
    copy.visited = engine.visited
    return copy


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_plans_equal_the_interpreted_ones_and_brute_force(data: st.DataObject) -> None:
    query = data.draw(queries())
    note(repr(query.describe_query()))
    stream = data.draw(streams(query))
    generated, interpreted = FirstOrderEngine(query), FirstOrderEngine(query, generated=False)
    assert set(generated._deltas) == set(query.relations)  # every plan generated
    assert not interpreted._deltas
    bags: dict[str, Counter[tuple[Any, ...]]] = {r: Counter() for r in query.relations}
    generated.all_entries()  # log changes from here, as after a checkpoint
    interpreted.all_entries()
    for i, (rel, tup, delta) in enumerate(stream):
        assert _apply(generated, rel, tup, delta) == _apply(interpreted, rel, tup, delta)
        if bags[rel][tup] + delta >= 0:
            bags[rel][tup] += delta
            bags[rel] = +bags[rel]
        assert generated.snapshot() == interpreted.snapshot(), (i, query.describe())
        assert generated.stats() == interpreted.stats()
        assert sorted(generated.changed_entries()) == sorted(interpreted.changed_entries())
        assert _close(generated.aggregates(), brute_force(query, bags))
        if i % 5 in (2, 4):  # restored copies run their plans over the restored bags
            generated, interpreted = _restored(generated, i % 5 == 4), _restored(interpreted, i % 5 == 4)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_generated_recompute_equals_brute_force(data: st.DataObject) -> None:
    """The baseline reads through the same delta functions (one per tuple of the first relation)."""
    query = data.draw(queries())
    engine = RecomputeEngine(query)
    bags: dict[str, Counter[tuple[Any, ...]]] = {r: Counter() for r in query.relations}
    for rel, tup, delta in data.draw(streams(query)):
        if not _apply(engine, rel, tup, delta):
            bags[rel][tup] += delta
            bags[rel] = +bags[rel]
    assert _close(engine.aggregates(), brute_force(query, bags))


def test_a_plan_python_refuses_keeps_the_interpreted_path() -> None:
    """An expression nested past Python's block indentation limit: that relation's plan is walked by
    the closures, with the same results."""
    deep = " else ".join(["(x + 1) if x > 0"] * 120) + " else x"
    query = Query({"r": {"k": "int", "x": "float"}, "q": {"k": "int"}}, ["k"], None, {"d": deep})
    engine = FirstOrderEngine(query)
    assert "r" not in engine._deltas and "q" not in engine._deltas
    assert set(engine._factories) == set()
    rows = [
        UpdateEvent("r", {"k": 1, "x": 2.0}, 1),
        UpdateEvent("q", {"k": 1}, 2),
        UpdateEvent("r", {"k": 1, "x": -1.0}, 1),
    ]
    assert engine.apply(rows) == []
    assert engine.aggregates() == {(1,): [4, 2 * 3.0 + 2 * -1.0]}


def test_engines_of_one_query_share_the_compiled_plans_not_the_state() -> None:
    """A worker keeps an engine per key: the plans compile once per query, each engine binds its own
    bags."""
    query = Query({"r": {"k": "int", "x": "float"}, "q": {"k": "int"}}, ["k"], "x > 0", {"s": "x"})
    one, two = FirstOrderEngine(query), FirstOrderEngine(Query(query.types, ["k"], "x > 0", {"s": "x"}))
    assert one._factories == two._factories and one._deltas["r"] is not two._deltas["r"]
    one.apply([UpdateEvent("q", {"k": 1}, 1), UpdateEvent("r", {"k": 1, "x": 2.0}, 3)])
    two.apply([UpdateEvent("r", {"k": 1, "x": 2.0}, 1)])
    assert one.aggregates() == {(1,): [3, 6.0]} and two.aggregates() == {}
