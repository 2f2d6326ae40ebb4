"""The compiled triangle kernels (services/triangles/_kernels.c) give exactly what their Python reference
loops give (services/triangles/kernels.py): the same sums, the same views after a step, in the same
iteration order, with multiplicities beyond 64 bits, negative ones and entries that cancel to zero."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.services.triangles import kernels
from tests.unit.extension_checks import printed_in_child, require_built

require_built(
    kernels.compiled,
    "triangle kernels",
    "ivmstream.services.triangles._kernels",
    "services/triangles/_kernels.c",
)

C = kernels.compiled

# Ids as the service keeps them (ints or strings), from a small domain so rows overlap; multiplicities
# from small (the 64-bit path) to far beyond 64 bits (Python's integers), both signs, never 0.
ids = st.one_of(st.integers(-4, 12), st.sampled_from(["a", "b", "c", "é"]))
mults = st.one_of(
    st.integers(-3, 3), st.integers(-(2**70), 2**70), st.sampled_from([2**62, -(2**63), 2**63 - 1, 3 * 2**31])
).filter(bool)
rows = st.dictionaries(ids, mults, max_size=12)
indexes = st.dictionaries(ids, st.dictionaries(ids, mults, min_size=1, max_size=6), max_size=10)
views = st.dictionaries(st.tuples(ids, ids), mults, max_size=30)


def both(name: str, *args: Any) -> tuple[Any, Any]:
    """(compiled result, Python result), each on its own copy of any view it changes."""
    return getattr(C, name)(*args), getattr(kernels, f"py_{name}")(*args)


@settings(max_examples=150, deadline=None)
@given(rows, rows)
def test_dot_equals_the_python_loop(walk, probe):
    got, want = both("dot", walk, probe)
    assert got == want and type(got) is int
    assert got == sum(a * probe[c] for c, a in walk.items() if c in probe)  # the definition itself


@settings(max_examples=150, deadline=None)
@given(rows, indexes, ids)
def test_probe_dot_equals_the_python_loop(walk, index, x):
    got, want = both("probe_dot", walk, index, x)
    assert got == want and type(got) is int
    assert got == sum(a * index[c][x] for c, a in walk.items() if c in index and x in index[c])


def _overlapping(view: dict, row: dict, fixed: Any, fixed_first: bool, m: int, cancel: bool) -> dict:
    """A view that holds, for some of the row's entries, exactly the value the step cancels."""
    view = dict(view)
    if cancel:
        for c, b in list(row.items())[::2]:
            view[(fixed, c) if fixed_first else (c, fixed)] = -b * m
    return view


@settings(max_examples=150, deadline=None)
@given(views, rows, ids, mults, st.one_of(st.none(), rows), st.booleans())
def test_light_pass_changes_the_view_exactly_as_the_python_loop(view, col, y, m, probe, cancel):
    view = _overlapping(view, col, y, False, m, cancel)
    mine, ref = dict(view), dict(view)
    got = C.light_pass(mine, col, y, m, probe)
    want = kernels.py_light_pass(ref, col, y, m, probe)
    assert got == want and type(got) is int
    assert list(mine.items()) == list(ref.items())  # same entries, same order
    assert all(mine.values())  # no zero is kept


@settings(max_examples=150, deadline=None)
@given(views, ids, rows, mults, indexes, st.booleans())
def test_heavy_pass_changes_the_view_exactly_as_the_python_loop(view, x, lrow, m, plf, cancel):
    view = _overlapping(view, lrow, x, True, m, cancel)
    mine, ref = dict(view), dict(view)
    got = C.heavy_pass(mine, x, lrow, m, plf)
    want = kernels.py_heavy_pass(ref, x, lrow, m, plf)
    assert got == want and type(got) is int
    assert list(mine.items()) == list(ref.items())
    assert all(mine.values())


def test_wrong_arguments_raise_instead_of_crashing():
    with pytest.raises(TypeError):
        C.dot({1: 1}, [1])
    with pytest.raises(TypeError):
        C.dot({1: 1})  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        C.probe_dot({1: 1}, {1: [2]}, 2)  # a row that is not a dict
    view = {(1, 2): 3}
    with pytest.raises(ValueError):
        C.heavy_pass(view, 1, view, 1, {})  # type: ignore[arg-type]


def test_the_engines_use_the_compiled_kernels_unless_told_not_to():
    assert kernels.ACTIVE == "compiled" and kernels.dot is C.dot
    code = (
        "from ivmstream.services.triangles import kernels; "
        "print(kernels.ACTIVE, kernels.dot is kernels.py_dot)"
    )
    out = printed_in_child(code)
    assert out == ["python", "True"]


@settings(max_examples=150, deadline=None)
@given(indexes, ids, ids, mults, st.booleans())
def test_bump_changes_the_index_exactly_as_the_python_update(index, x, y, m, cancel):
    if cancel and x in index and y in index[x]:
        m = -index[x][y]  # the entry reaches 0 and is dropped (its row too when it was the last)
    mine = {k: dict(row) for k, row in index.items()}
    ref = {k: dict(row) for k, row in index.items()}
    got = C.bump(mine, x, y, m)
    want = kernels.py_bump(ref, x, y, m)
    assert got == want and type(got) is int
    assert [(k, list(row.items())) for k, row in mine.items()] == [
        (k, list(row.items())) for k, row in ref.items()
    ]


# --- the engines on either kernels ----------------------------------------------------------------------

updates = st.lists(
    st.tuples(
        st.sampled_from("RST"), st.integers(0, 5), st.integers(0, 5), st.sampled_from([-2, -1, 1, 1, 2, 3])
    ),
    max_size=60,
)
ENGINE_CONFIGS = [("ivm-eps", e) for e in ("0", "1/3", "1/2", "1")] + [("first-order", None), ("auto", None)]


def _run(strategy: str, eps: str | None, stream: list, batch: int) -> tuple[list, bytes, list]:
    from ivmstream.events import UpdateEvent
    from ivmstream.services.triangles.engine import create_engine

    engine = create_engine("relations", strategy, eps)
    events = [
        UpdateEvent(
            r, {"a": x, "b": y} if r == "R" else {"b": x, "c": y} if r == "S" else {"c": x, "a": y}, m
        )
        for r, x, y, m in stream
    ]
    counts = []
    for i in range(0, len(events), batch):
        assert engine.apply(events[i : i + batch]) == []
        counts.append(engine.result()["count"])
    views = [list(v.items()) for v in getattr(engine, "views", [])]  # IVM^eps's views, in their order
    return counts, engine.snapshot(), views


@settings(max_examples=60, deadline=None)
@given(updates, st.sampled_from(ENGINE_CONFIGS), st.sampled_from([1, 7]))
def test_the_engines_reach_the_same_state_on_either_kernels(stream, config, batch):
    from ivmstream.services.triangles import base, baselines, ivm_eps

    compiled_run = _run(*config, stream, batch)
    pure = {
        name: getattr(kernels, f"py_{name}")
        for name in ("dot", "probe_dot", "light_pass", "heavy_pass", "bump")
    }
    saved = [
        (m, name, getattr(m, name)) for m in (base, baselines, ivm_eps) for name in pure if hasattr(m, name)
    ]
    try:
        for module, name, _fn in saved:
            setattr(module, name, pure[name])
        python_run = _run(*config, stream, batch)
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)
    assert compiled_run == python_run  # every count, the snapshot byte for byte, the views
