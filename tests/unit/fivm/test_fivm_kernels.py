"""The compiled column loops (services/fivm/_kernels.c) give exactly what their numpy reference gives,
bit for bit, on randomized columns; without the extension these tests fail, saying how to build it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ivmstream.services.fivm import kernels
from ivmstream.services.fivm.rings.cofactor import Cofactor

if kernels.compiled is None:  # never skipped: without the extension these tests fail, saying why
    pytest.fail(
        "the compiled F-IVM kernels ivmstream.services.fivm._kernels are not built. Build them with "
        "`make setup` (installs gcc and the Python headers if missing, then `pip install -e .` compiles "
        "services/fivm/_kernels.c), or, with a C compiler and the Python headers present, "
        "`.venv/bin/pip install -e .`",
        pytrace=False,
    )

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


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 6), st.integers(0, 4), st.integers(0, 4))
def test_gather_into_reads_payload_objects_as_the_numpy_form_does(data, n, lo, k):
    # payloads of one block, or (mixed) one of another block or width: both must refuse the same ones
    blocks = [(lo, k)] * n
    if n and data.draw(st.booleans()):
        blocks[data.draw(st.integers(0, n - 1))] = (
            data.draw(st.integers(0, 4)),
            data.draw(st.integers(0, 4)),
        )
    payloads = [
        Cofactor(b_lo, data.draw(counts), data.draw(column(1, b_k))[0], data.draw(column(1, tri(b_k)))[0])
        for b_lo, b_k in blocks
    ]
    want_k = payloads[0].k if n else 0
    want_lo = payloads[0].lo if n else 0
    results = []
    for fn in (C.gather_into, kernels.py_gather_into):
        out = (np.zeros(n, np.int64), np.zeros((n, want_k)), np.zeros((n, tri(want_k))))
        ok = fn(payloads, want_lo, *out)
        results.append((ok, out))
    (ok_c, out_c), (ok_p, out_p) = results
    assert ok_c == ok_p == all(p.k == want_k and (not want_k or p.lo == want_lo) for p in payloads)
    if ok_c:
        assert all(same(x, y) for x, y in zip(out_c, out_p, strict=True))


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(0, 6), st.integers(0, 4))
def test_payload_rows_makes_the_same_payloads_as_the_python_loop(data, n, k):
    keys = [(float(i), "k") for i in range(n)]
    ints_ = data.draw(ints(n)).tolist()
    sums, quad = data.draw(column(n, k)), data.draw(column(n, tri(k)))
    sums.flags.writeable = quad.flags.writeable = False
    got = C.payload_rows(Cofactor, keys, 3, ints_, sums, quad)
    want = kernels.py_payload_rows(Cofactor, keys, 3, ints_, sums, quad)
    assert [key for key, _ in got] == keys == [key for key, _ in want]
    for (_, p), (_, q) in zip(got, want, strict=True):
        assert type(p) is Cofactor and (p.lo, p.count) == (q.lo, q.count) == (3, q.count)
        assert same(p.sums, q.sums) and same(p.quad, q.quad)
        assert not p.sums.flags.writeable and not p.quad.flags.writeable  # rows of read-only columns
        assert p.sums.base is not None  # a view of the column, not a copy


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
    with pytest.raises(ValueError, match="shapes"):
        C.payload_rows(Cofactor, [(1.0,)], 0, [1, 2], np.empty((1, 1)), np.empty((1, 1)))
    with pytest.raises(TypeError, match="class"):
        C.payload_rows(None, [], 0, [], np.empty((0, 1)), np.empty((0, 1)))


def test_the_engine_uses_the_compiled_kernels_unless_told_not_to():
    assert kernels.ACTIVE == "compiled" and kernels.mul_rows_into is C.mul_rows_into
    code = (
        "from ivmstream.services.fivm import kernels; "
        "print(kernels.ACTIVE, kernels.mul_rows_into is kernels.py_mul_rows_into)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"IVMSTREAM_PURE_PYTHON": "1"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["python", "True"]
