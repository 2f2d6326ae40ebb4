"""The compiled column loops (the sources services/fivm/_kernels.h lists) give exactly what their numpy
reference gives, bit for bit, on randomized columns; without the extension these tests fail, saying how
to build it."""

from __future__ import annotations

import gc
import math
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ivmstream.events import UpdateEvent
from ivmstream.services.fivm import kernels
from ivmstream.services.fivm import state as fivm_state
from ivmstream.services.fivm.rings.cofactor import (
    BlockLayoutError,
    Cofactor,
    CofactorRing,
    CofactorRows,
    RowCofactor,
    mul_chain,
    mul_rows,
    sum_by,
)
from ivmstream.services.fivm.views import View
from tests.unit.extension_checks import printed_in_child, require_built

require_built(kernels.compiled, "F-IVM kernels", "ivmstream.services.fivm._kernels", "services/fivm/_*.c")

C = kernels.compiled

# Values that make rounding matter (wide exponents, signed zeros, subnormals); products stay finite.
floats = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, 1e-310, -1e100, 1e100, 0.1, 1 / 3]),
)
counts = st.one_of(st.integers(-3, 3), st.integers(-(2**40), 2**40))


def tri(k: int) -> int:
    return k * (k + 1) // 2


def column(n: int, width: int) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, (n, width), elements=floats)


def ints(n: int) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.int64, (n,), elements=counts)


def same(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal bit for bit (so -0.0 and 0.0 differ, as they would in the payload's bytes)."""
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(0, 7), st.integers(0, 5), st.integers(0, 5))
def test_mul_rows_into_equals_the_numpy_block_product(data, n, ka, kb):
    a = (data.draw(ints(n)), data.draw(column(n, ka)), data.draw(column(n, tri(ka))))
    b = (data.draw(ints(n)), data.draw(column(n, kb)), data.draw(column(n, tri(kb))))
    k = ka + kb
    results = []
    for fn in (C.mul_rows_into, kernels.py_mul_rows_into):
        out = (np.empty(n, np.int64), np.empty((n, k)), np.empty((n, tri(k))))
        fn(*a, *b, *out)
        results.append(out)
    assert all(same(x, y) for x, y in zip(*results, strict=True))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(0, 7), st.integers(0, 6))
def test_lift_into_equals_the_numpy_lifts(data, n, k):
    x, m = data.draw(column(n, k)), data.draw(ints(n))
    results = []
    for fn in (C.lift_into, kernels.py_lift_into):
        out = (np.empty((n, k)), np.empty((n, tri(k))))
        fn(x, m, *out)
        results.append(out)
    assert all(same(u, v) for u, v in zip(*results, strict=True))


def row_payloads(data, n: int, lo: int, k: int) -> list[RowCofactor]:
    """Payloads that are rows of read-only columns, as column execution stores them."""
    block = CofactorRows(lo, data.draw(ints(n)), data.draw(column(n, k)), data.draw(column(n, tri(k))))
    block.sums.flags.writeable = block.quad.flags.writeable = False
    return [
        p for _, p in kernels.py_payload_rows(RowCofactor, [()] * n, block.lo, block.counts.tolist(), block)
    ]


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 6), st.integers(0, 4), st.integers(0, 4))
def test_gather_into_reads_payload_objects_as_the_numpy_form_does(data, n, lo, k):
    # payloads of one block, or (mixed) one of another block or width: both must refuse the same ones;
    # some are rows of columns (two different column blocks among them), read from their columns
    blocks = [(lo, k)] * n
    if n and data.draw(st.booleans()):
        blocks[data.draw(st.integers(0, n - 1))] = (
            data.draw(st.integers(0, 4)),
            data.draw(st.integers(0, 4)),
        )
    payloads: list[Cofactor] = [
        Cofactor(b_lo, data.draw(counts), data.draw(column(1, b_k))[0], data.draw(column(1, tri(b_k)))[0])
        for b_lo, b_k in blocks
    ]
    for b_lo, b_k in ((lo, k), (lo, k)) if n else ():
        rows = row_payloads(data, data.draw(st.integers(1, 3)), b_lo, b_k)
        for p in rows:
            payloads[data.draw(st.integers(0, n - 1))] = p
    want_k = payloads[0].k if n else 0
    want_lo = payloads[0].lo if n else 0
    results = []
    for fn in (C.gather_into, kernels.py_gather_into):
        out = (np.zeros(n, np.int64), np.zeros((n, want_k)), np.zeros((n, tri(want_k))))
        ok = fn(payloads, want_lo, *out, RowCofactor)
        results.append((ok, out))
    (ok_c, out_c), (ok_p, out_p) = results
    assert ok_c == ok_p == all(p.k == want_k and (not want_k or p.lo == want_lo) for p in payloads)
    if ok_c:
        assert all(same(x, y) for x, y in zip(out_c, out_p, strict=True))
        for i, q in enumerate(payloads):  # each row as the payload object reads
            assert out_c[0][i] == q.count and same(out_c[1][i], q.sums) and same(out_c[2][i], q.quad)


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 6), st.integers(0, 4))
def test_payload_rows_makes_the_same_payloads_as_the_python_loop(data, n, k):
    keys = [(float(i), "k") for i in range(n)]
    ints_ = data.draw(ints(n)).tolist()
    block = CofactorRows(3, ints_, data.draw(column(n, k)), data.draw(column(n, tri(k))))
    block.sums.flags.writeable = block.quad.flags.writeable = False
    lo = block.lo  # 3, or 0 for an empty block (k = 0), as for any payload
    got = C.payload_rows(RowCofactor, keys, lo, ints_, block)
    want = kernels.py_payload_rows(RowCofactor, keys, lo, ints_, block)
    assert [key for key, _ in got] == keys == [key for key, _ in want]
    for i, ((_, p), (_, q)) in enumerate(zip(got, want, strict=True)):
        assert type(p) is RowCofactor and (p.lo, p.count, p.row) == (q.lo, q.count, q.row)
        assert p.block is block and (p.lo, p.count) == (3 if k else 0, ints_[i])
        assert same(p.sums, block.sums[i]) and same(p.quad, block.quad[i]) and same(p.sums, q.sums)
        assert not p.sums.flags.writeable and not p.quad.flags.writeable  # rows of read-only columns
        assert not gc.is_tracked(p)  # it holds ints and its columns: no cycle can pass through it
        plain = Cofactor(lo, ints_[i], block.sums[i], block.quad[i])
        assert p == plain and plain == p
        copied = pickle.loads(pickle.dumps(p))
        assert type(copied) is Cofactor and same(copied.sums, p.sums) and copied.count == p.count


class _LoggedRow(RowCofactor):
    """A payload class whose attributes go through its own ``__setattr__``: no direct slot writes."""

    __slots__ = ("log",)

    def __setattr__(self, name: str, value: object) -> None:
        if name != "log":
            object.__setattr__(self, "log", (*getattr(self, "log", ()), name))
        object.__setattr__(self, name, value)


class _CountedRow(RowCofactor):
    """A payload class whose ``count`` is a property over another slot: no direct slot writes."""

    __slots__ = ("stored",)

    @property
    def count(self) -> int:  # type: ignore[override]
        return self.stored  # type: ignore[no-any-return]

    @count.setter
    def count(self, value: int) -> None:
        self.stored = value + 1


@pytest.mark.parametrize("cls", [_LoggedRow, _CountedRow])
def test_payload_rows_sets_attributes_through_a_class_that_customizes_them(cls):
    # the compiled loop writes a fresh payload's slots directly only for plain slots; else it sets them
    # as the Python loop does, through the class's own __setattr__ or descriptors
    block = CofactorRows(2, [5, -3], np.ones((2, 1)), np.ones((2, 1)))
    got = C.payload_rows(cls, [(1.0,), (2.0,)], 2, [5, -3], block)
    want = kernels.py_payload_rows(cls, [(1.0,), (2.0,)], 2, [5, -3], block)
    for (_, p), (_, q) in zip(got, want, strict=True):
        assert type(p) is cls and (p.lo, p.count, p.row, p.block) == (q.lo, q.count, q.row, q.block)
        if cls is _LoggedRow:
            assert sorted(p.log) == sorted(q.log) == ["block", "count", "lo", "row"]
        else:
            assert p.count == q.count and p.stored == q.stored


def test_the_kernels_refuse_arrays_of_the_wrong_kind_or_shape():
    x, m = np.ones((2, 3)), np.ones(2, dtype=np.int64)
    with pytest.raises(ValueError, match="shapes"):
        C.lift_into(x, m, np.empty((2, 3)), np.empty((2, 5)))
    with pytest.raises(TypeError, match="float64"):
        C.lift_into(x.astype(np.float32), m, np.empty((2, 3)), np.empty((2, 6)))
    with pytest.raises(TypeError, match="int64"):
        C.lift_into(x, m.astype(np.float64), np.empty((2, 3)), np.empty((2, 6)))
    with pytest.raises(ValueError, match="contiguous"):
        C.lift_into(np.ones((3, 2)).T, m, np.empty((2, 3)), np.empty((2, 6)))
    read_only = np.frombuffer(bytes(96)).reshape(2, 6)
    with pytest.raises((BufferError, ValueError)):
        C.lift_into(x, m, np.empty((2, 3)), read_only)
    with pytest.raises(TypeError, match="expected 9 arguments"):
        C.mul_rows_into(m, x)
    with pytest.raises(ValueError, match="shapes"):
        C.gather_into([Cofactor(0, 1)], 0, np.empty(2, np.int64), np.empty((2, 0)), np.empty((2, 0)))
    block = CofactorRows(0, [1], np.empty((1, 1)), np.empty((1, 1)))
    with pytest.raises(ValueError, match="shapes"):
        C.payload_rows(RowCofactor, [(1.0,)], 0, [1, 2], block)
    with pytest.raises(TypeError, match="class"):
        C.payload_rows(None, [], 0, [], block)
    with pytest.raises(TypeError, match="row_cls"):
        C.gather_into([], 0, np.empty(0, np.int64), np.empty((0, 0)), np.empty((0, 0)), 1)
    with pytest.raises(TypeError, match="dict"):
        C.absorb_run([], 0, "A", ["x"], [])
    with pytest.raises(ValueError, match="start"):
        C.absorb_run([], -1, "A", ["x"], {})


def test_the_engine_uses_the_compiled_kernels_unless_told_not_to():
    assert kernels.ACTIVE == "compiled" and kernels.mul_rows_into is C.mul_rows_into
    assert kernels.absorb_run is C.absorb_run and kernels.payload_rows is C.payload_rows
    assert kernels.probe_get is C.probe_get
    assert kernels.install_new is C.install_new and kernels.columns_into is C.columns_into
    assert kernels.probe_all is C.probe_all and kernels.view_entries is C.view_entries
    code = (
        "from ivmstream.services.fivm import kernels; "
        "print(kernels.ACTIVE, kernels.mul_rows_into is kernels.py_mul_rows_into)"
    )
    out = printed_in_child(code)
    assert out == ["python", "True"]


# Events of one all-float relation (columns k, x): good rows, rows a run must leave to the per-event
# checks (a missing, extra or non-float value, NaN, ±inf, a bool or zero delta), signed zeros, repeats.
GOOD_VALUE = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e308, -1e308])
BAD_VALUE = st.sampled_from([math.nan, math.inf, -math.inf, 2, True, "1", None])


@st.composite
def run_event(draw: st.DrawFn, bad: bool) -> UpdateEvent:
    value = st.one_of(GOOD_VALUE, GOOD_VALUE, GOOD_VALUE, BAD_VALUE) if bad else GOOD_VALUE
    row: dict[str, Any] = {"k": draw(value), "x": draw(value)}
    shape = draw(st.integers(0, 12)) if bad else 2
    if shape == 0:
        del row["k"]
    elif shape == 1:
        row["z"] = 1.0
    delta = (
        st.one_of(st.just(1), st.integers(-3, 3), st.just(True)) if bad else st.sampled_from([1, 1, -1, 2])
    )
    return UpdateEvent(draw(st.sampled_from("AAAAB")), row, draw(delta))


def brute_absorb(events: list[UpdateEvent], start: int, batch: dict) -> int:
    """One event at a time, the definition: the run of A's events from start, every value a finite
    float, every delta a non-zero int, at least two events; else start and nothing added."""
    end = start
    while end < len(events) and events[end].relation == "A":
        end += 1
    if end - start < 2:
        return start
    out = dict(batch)
    for ev in events[start:end]:
        if type(ev.delta) is not int or not ev.delta or set(ev.row) != {"k", "x"}:
            return start
        values = (ev.row["k"], ev.row["x"])
        if any(type(v) is not float or not math.isfinite(v) for v in values):
            return start
        key = tuple(v + 0.0 for v in values)
        out[key] = out.get(key, 0) + ev.delta
    batch.clear()
    batch.update(out)
    return end


@settings(max_examples=100, deadline=None)
@given(st.data(), st.booleans())
def test_absorb_run_consolidates_a_run_as_the_python_form_and_one_event_at_a_time_do(data, bad):
    events = data.draw(st.lists(run_event(bad), max_size=12))
    start = data.draw(st.integers(0, len(events)))
    before = data.draw(st.dictionaries(st.tuples(GOOD_VALUE, GOOD_VALUE), st.integers(-2, 2), max_size=3))
    before = {tuple(v + 0.0 for v in k): m for k, m in before.items()}
    got, want, brute = dict(before), dict(before), dict(before)
    end = C.absorb_run(events, start, "A", ("k", "x"), got)
    assert (
        end
        == kernels.py_absorb_run(events, start, "A", ("k", "x"), want)
        == brute_absorb(events, start, brute)
    )
    assert list(got.items()) == list(want.items()) == list(brute.items())  # same order, same sums
    assert all(math.copysign(1.0, v) > 0 for key in got for v in key if v == 0.0)  # no -0.0 stored
    if end == start:
        assert got == before  # untouched


class _DictEvent:
    """An event whose fields live in its __dict__: read through getattr, not from slots."""

    def __init__(self, relation: str, row: dict, delta: int) -> None:
        self.relation, self.row, self.delta = relation, row, delta


class _PropertyEvent(UpdateEvent):
    """A struct event whose ``delta`` is a property over its field: read through getattr."""

    @property  # type: ignore[misc]
    def delta(self) -> int:  # type: ignore[override]
        return 2 * self.key_delta

    key_delta: int = 0


@settings(max_examples=50, deadline=None)
@given(st.lists(run_event(False), max_size=10), st.lists(st.integers(0, 2), max_size=10))
def test_absorb_run_reads_events_of_any_class_as_their_attributes_give(events, kinds):
    # the compiled run reads a struct event's fields from its slots; other events, mixed in, by getattr
    def other(e: UpdateEvent, kind: int) -> object:
        if kind == 1:
            return _DictEvent(e.relation, e.row, e.delta)
        if kind == 2:
            return _PropertyEvent(e.relation, e.row, 0, key_delta=e.delta)
        return e

    mixed = [other(e, k) for e, k in zip(events, kinds + [0] * len(events), strict=False)]
    got: dict[tuple[float, ...], int] = {}
    want: dict[tuple[float, ...], int] = {}
    end = C.absorb_run(mixed, 0, "A", ("k", "x"), got)
    assert end == kernels.py_absorb_run(mixed, 0, "A", ("k", "x"), want)
    assert list(got.items()) == list(want.items())


@settings(max_examples=50, deadline=None)
@given(st.data(), st.integers(0, 4), st.lists(st.integers(0, 3), min_size=2, max_size=5))
def test_mul_chain_into_equals_the_products_one_at_a_time_and_the_ring_product(data, n, widths):
    # adjacent blocks [lo_j, lo_j + k_j) multiplied in a random order that keeps each partial product
    # one contiguous range (as trigger plans do): start anywhere, grow to the left or to the right
    starts = [sum(widths[:j]) for j in range(len(widths))]
    order = [data.draw(st.integers(0, len(widths) - 1))]
    while len(order) < len(widths):
        left, right = min(order) - 1, max(order) + 1
        sides = [j for j in (left, right) if 0 <= j < len(widths)]
        order.append(data.draw(st.sampled_from(sides)))
    factors = [
        CofactorRows(
            starts[j],
            data.draw(small_ints(n)),
            data.draw(column(n, widths[j])),
            data.draw(column(n, tri(widths[j]))),
        )
        for j in order
    ]
    got = mul_chain(factors)
    c = np.ascontiguousarray
    slots = [(c(f.counts), c(f.sums), c(f.quad)) for f in factors]
    swaps = [bool(a) for a in got_swaps(factors)]
    k = sum(widths)
    want = (np.empty(n, np.int64), np.empty((n, k)), np.empty((n, tri(k))))
    kernels.py_mul_chain_into(slots, swaps, *want)
    assert same(got.counts, want[0]) and same(got.sums, want[1]) and same(got.quad, want[2])
    one_by_one = factors[0]
    for f in factors[1:]:
        one_by_one = mul_rows(one_by_one, f)
    assert one_by_one.lo == got.lo
    assert same(got.counts, one_by_one.counts) and same(got.sums, one_by_one.sums)
    assert same(got.quad, one_by_one.quad)
    ring = CofactorRing([f"v{i}" for i in range(k)])
    for i in range(n):  # the ring's own product of the row payloads, the definition
        p = factors[0].row(i)
        for f in factors[1:]:
            p = ring.mul(p, f.row(i))
        assert p == got.row(i)


def small_ints(n: int) -> st.SearchStrategy[np.ndarray]:
    """Counts whose product over five factors stays in int64 (the engine checks that before it multiplies)."""
    return hnp.arrays(np.int64, (n,), elements=st.integers(-(2**12), 2**12))


def got_swaps(factors: list[CofactorRows]) -> list[bool]:
    """Whether each next factor's block comes before the running product's (then it goes first)."""
    lo, k, out = factors[0].lo, factors[0].sums.shape[1], []
    for f in factors[1:]:
        kb = f.sums.shape[1]
        swap = bool(k and kb and lo > f.lo)
        out.append(swap)
        lo = (f.lo if kb else lo) if swap else (lo if k else f.lo)
        k += kb
    return out


def test_mul_chain_into_refuses_chains_it_cannot_multiply():
    one = (np.ones(2, np.int64), np.ones((2, 1)), np.ones((2, 1)))
    out = (np.empty(2, np.int64), np.empty((2, 2)), np.empty((2, 3)))
    with pytest.raises(ValueError, match="two slots"):
        C.mul_chain_into([one], [], *out)
    with pytest.raises(ValueError, match="shapes"):
        C.mul_chain_into([one, one], [False], np.empty(2, np.int64), np.empty((2, 3)), np.empty((2, 6)))
    with pytest.raises(TypeError, match="tuple"):
        C.mul_chain_into([one, list(one)], [False], *out)
    with pytest.raises(BlockLayoutError):
        mul_chain([CofactorRows(0, [1], [[1.0]], [[1.0]]), CofactorRows(2, [1], [[1.0]], [[1.0]])])


def test_the_products_refuse_an_output_that_shares_memory_with_an_input_or_output():
    # the compiled products vectorize on the promise that outputs and inputs are apart
    a = (np.ones(2, np.int64), np.ones((2, 1)), np.ones((2, 1)))
    out = (np.empty(2, np.int64), np.empty((2, 2)), np.empty((2, 3)))
    buf, two = np.ones(8), np.empty(8)
    inside = (a[0], a[1], buf[:2].reshape(2, 1))  # an input whose memory an output's overlaps
    for ins, shared in (
        (a, (a[0], out[1], out[2])),  # an output that is an input
        (inside, (out[0], buf[1:5].reshape(2, 2), out[2])),  # an output over part of an input
        (a, (out[0], two[:4].reshape(2, 2), two[2:8].reshape(2, 3))),  # two outputs in one array
    ):
        with pytest.raises(ValueError, match="shares memory"):
            C.mul_rows_into(*ins, *a, *shared)
        with pytest.raises(ValueError, match="shares memory"):
            C.mul_chain_into([ins, a], [False], *shared)
    C.mul_rows_into(*a, *a, *out)  # an input given twice is only read
    assert out[0].tolist() == [1, 1] and out[1].tolist() == [[1.0, 1.0]] * 2


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.tuples(st.integers(0, 9)), st.integers(), max_size=8),
    st.lists(st.tuples(st.integers(0, 9)), max_size=12),
)
def test_probe_get_finds_what_dict_lookups_find(data, keys):
    rows = [(*key, "row") for key in keys]
    want_found = [data[k] for k in keys if k in data]
    want_keep = [i for i, k in enumerate(keys) if k in data]
    for fn in (C.probe_get, kernels.py_probe_get):
        found, keep, kept = fn(data, list(keys), rows)
        assert found == want_found
        if len(want_keep) == len(keys):
            assert keep is None and kept is rows  # every row found one: nothing copied
        else:
            assert keep == want_keep and kept == [rows[i] for i in want_keep]


numbers = st.one_of(floats, st.integers(-(2**70), 2**70), st.sampled_from([2**53 + 1, -(2**63)]))


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 5), st.integers(1, 4))
def test_columns_into_converts_as_numpy_does(data, n, width):
    rows = [tuple(data.draw(numbers) for _ in range(width)) for _ in range(n)]
    positions = data.draw(st.lists(st.integers(0, width - 1), max_size=4))
    got, want = np.empty((n, len(positions))), np.empty((n, len(positions)))
    C.columns_into(rows, positions, got)
    kernels.py_columns_into(rows, positions, want)
    brute = np.array([[float(r[p]) for p in positions] for r in rows], dtype=np.float64)
    assert same(got, want) and same(got, brute.reshape(n, len(positions)))


def test_probe_get_and_columns_into_refuse_what_they_cannot_read():
    with pytest.raises(TypeError, match="one length"):
        C.probe_get({}, [(1,)], [])
    with pytest.raises(IndexError, match="outside"):
        C.columns_into([(1.0,)], [1], np.empty((1, 1)))
    with pytest.raises(TypeError):
        C.columns_into([("a",)], [0], np.empty((1, 1)))
    with pytest.raises(ValueError, match="shapes"):
        C.columns_into([(1.0,)], [0], np.empty((2, 1)))


def view_state(view: View) -> tuple:
    return list(view.data.items()), list(view.seq.items()), list(view.changed), view.next_seq


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(-2, 2).filter(bool)), max_size=8),
    st.lists(st.tuples(st.integers(0, 9), st.integers(-2, 2).filter(bool)), max_size=8),
)
def test_install_new_adds_a_batch_as_the_per_key_loop_does(before, batch):
    # int payloads: a held key's sum may reach zero and leave the view; new keys take creation numbers
    delta = list({(k,): m for k, m in batch}.items())  # distinct keys, non-zero payloads
    views = []
    for _ in range(3):
        view = View("V", ("k",), lambda a, b: a + b, lambda p: p == 0)
        view.add_all([((k,), m) for k, m in before])
        view.changed.clear()
        views.append(view)
    compiled, python, loop = views
    compiled.add_nonzero(list(delta))  # the compiled kernel (the module default here)
    nxt, held = kernels.py_install_new(python.data, python.seq, python.changed, list(delta), python.next_seq)
    python.next_seq = nxt
    for key, m in held:
        python.add(key, m)
    loop.add_all(delta)
    assert view_state(compiled) == view_state(loop) == view_state(python)
    got = C.install_new({}, {}, {}, list(delta), 5)
    assert got == (5 + len(delta), [])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.tuples(st.integers(0, 6)), st.integers(), max_size=6), min_size=1, max_size=3
    ),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=10),
    st.booleans(),
)
def test_probe_all_keeps_the_rows_every_sibling_holds(datas, rows, shared):
    # sibling p looks up position 0 of the row, or position p % 2 (a key list shared, or per sibling)
    by_first = [(row[0],) for row in rows]
    keylists = [by_first if shared else [(row[p % 2],) for row in rows] for p in range(len(datas))]
    want_keep = [i for i in range(len(rows)) if all(keylists[p][i] in d for p, d in enumerate(datas))]
    want_found = [[d[keylists[p][i]] for i in want_keep] for p, d in enumerate(datas)]
    for fn in (C.probe_all, kernels.py_probe_all):
        found, keep, kept = fn(list(datas), keylists, rows)
        assert found == want_found
        if len(want_keep) == len(rows):
            assert keep is None and kept is rows
        else:
            assert keep == want_keep and kept == [rows[i] for i in want_keep]
    with pytest.raises(TypeError, match="one per row"):
        C.probe_all([{}], [[]], [(1, 2)])


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(1, 300), st.integers(0, 3), st.booleans())
def test_sum_by_on_groups_in_order_adds_as_the_gathered_rows_do(data, n, k, one_group):
    # groups already in order (a view of one key, say) are summed without gathering the rows: the same
    # np.add.reduceat over the same C-contiguous rows, so the sums are equal bit for bit
    rows = CofactorRows(0, data.draw(ints(n)), data.draw(column(n, k)), data.draw(column(n, tri(k))))
    ids = (
        np.zeros(n, np.int64)
        if one_group
        else np.sort(data.draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, 3))))
    )
    got_ids, got = sum_by(ids, rows)
    order = np.argsort(ids, kind="stable")
    starts = np.flatnonzero(np.r_[True, ids[order][1:] != ids[order][:-1]])
    assert same(got_ids, ids[order][starts])
    for mine, col in ((got.counts, rows.counts), (got.sums, rows.sums), (got.quad, rows.quad)):
        assert same(mine, np.add.reduceat(col[order], starts, axis=0))
    for g in np.unique(ids):  # and each group's sum is its rows' sum (exact for the counts)
        assert int(got.counts[list(got_ids).index(g)]) == int(rows.counts[ids == g].sum())


@settings(max_examples=80, deadline=None)
@given(st.data(), st.integers(0, 5), st.integers(0, 4), st.integers(0, 3))
def test_view_entries_are_the_seq_and_the_rings_encoding_of_each_payload(data, n, lo, k):
    # plain payloads and rows of columns, counts of any size in int64 (0, negative, 2^40), deletes (keys
    # the view no longer holds)
    rows = row_payloads(data, n, lo, k)
    plain = [
        Cofactor(lo, data.draw(counts), data.draw(column(1, k))[0], data.draw(column(1, tri(k)))[0])
        for _ in range(n)
    ]
    keys = {(i,): None for i in range(2 * n)}
    held = {(i,): p for i, p in enumerate(rows + plain) if not (i % 3 == 0 and data.draw(st.booleans()))}
    seq = {key: data.draw(st.integers(0, 2**64 - 1)) for key in held}
    ring = CofactorRing([f"v{i}" for i in range(lo + k)])
    want = [
        (
            "V",
            fivm_state.encode_key(key),
            None if key not in held else fivm_state.encode_view_value(seq[key], ring.encode(held[key])),
        )
        for key in keys
    ]
    got = C.view_entries("V", keys, held, seq, RowCofactor, fivm_state.encode_key)
    assert got == kernels.py_view_entries("V", keys, held, seq, RowCofactor, fivm_state.encode_key) == want


def test_view_entries_leave_counts_past_int64_to_python():
    payload = Cofactor(0, 2**64, [1.0], [1.0])
    args = ("V", {(1,): None}, {(1,): payload}, {(1,): 1}, RowCofactor, fivm_state.encode_key)
    with pytest.raises(OverflowError):
        C.view_entries(*args)
    with pytest.raises(OverflowError):
        kernels.py_view_entries(*args)
