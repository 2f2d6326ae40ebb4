"""Checkpoint entries of float cofactor views: a payload whose products are its sums' products is stored
without them (k's top bit set), decodes to the same payload bit for bit, and state written in the full
form (every product stored) restores to the live engine's state; a view's entries are written in one
compiled pass (``kernels.view_entries``) that must give what encoding each entry on its own gives."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent as Ev
from ivmstream.services.fivm import kernels
from ivmstream.services.fivm import state as fivm_state
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.rings.cofactor import Cofactor, CofactorRing, CofactorRows, RowCofactor, tri_size
from ivmstream.services.fivm.views import View

HEADER = struct.Struct("<IIB")  # docs/fivm/rings.md §2.5, written here from the documented layout
TOP_BIT = 1 << 31

ANY_FLOAT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, 1e-310, 1e200, -1e200, math.inf, -math.inf, math.nan, 3.0, -2.5]),
)


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def products_of_sums(sums: list[float]) -> list[float]:
    """The upper triangle of s sᵀ, row-major, one Python float product per element."""
    return [sums[r] * sums[c] for r in range(len(sums)) for c in range(r, len(sums))]


def full_form(lo: int, count: int, sums: list[float], quad: list[float]) -> bytes:
    """The encoding with every product stored (as state written without the rank-one form holds it)."""
    c = count.to_bytes((count.bit_length() + 8) // 8, "little", signed=True) if count else b""
    return (
        HEADER.pack(lo, len(sums), len(c))
        + c
        + struct.pack(f"<{len(sums)}d", *sums)
        + struct.pack(f"<{len(quad)}d", *quad)
    )


@st.composite
def payloads(draw: Any) -> tuple[int, int, list[float], list[float]]:
    """(lo, count, sums, quad): a lift (count 1, products of the sums), a lift with one product changed,
    or arbitrary values, NaN and infinities included."""
    k = draw(st.integers(0, 4))
    sums = draw(st.lists(ANY_FLOAT, min_size=k, max_size=k))
    kind = draw(st.sampled_from(["lift", "changed", "any"]))
    if kind == "any":
        quad = draw(st.lists(ANY_FLOAT, min_size=tri_size(k), max_size=tri_size(k)))
    else:
        quad = products_of_sums(sums)
        if kind == "changed" and quad:
            quad[draw(st.integers(0, len(quad) - 1))] = draw(ANY_FLOAT)
    count = draw(st.one_of(st.just(1), st.integers(-(2**70), 2**70)))
    return draw(st.integers(0, 5)), count, sums, quad


@settings(max_examples=300, deadline=None)
@given(payloads())
def test_rank_one_payloads_leave_their_products_out_and_decode_bit_for_bit(case):
    lo, count, sums, quad = case
    ring = CofactorRing([f"v{i}" for i in range(12)])
    p = Cofactor(lo, count, sums, quad)
    lo = p.lo  # an empty block's lo is 0
    raw = ring.encode(p)
    prods = products_of_sums(sums)
    # brute force: every stored product is, bit for bit, the product of its sums, and none is NaN
    compact = bool(sums) and all(
        bits(q) == bits(x) and not math.isnan(x) for q, x in zip(quad, prods, strict=True)
    )
    lo_k = HEADER.unpack_from(raw)
    assert bool(lo_k[1] & TOP_BIT) == compact and lo_k[1] & (TOP_BIT - 1) == len(sums)
    if compact:  # the header with k's top bit, the count, the sums
        c = full_form(0, count, [], [])[HEADER.size :]
        assert raw == HEADER.pack(lo, len(sums) | TOP_BIT, len(c)) + c + struct.pack(f"<{len(sums)}d", *sums)
    else:
        assert raw == full_form(lo, count, sums, quad)
    back = ring.decode(raw)
    assert (back.lo, back.count, back.k) == (p.lo, p.count, p.k)
    assert back.sums.tobytes() == p.sums.tobytes() and back.quad.tobytes() == p.quad.tobytes()
    # state in the full form restores to the same payload
    old = ring.decode(full_form(lo, count, sums, quad))
    assert old.sums.tobytes() == p.sums.tobytes() and old.quad.tobytes() == p.quad.tobytes()
    # the checkpoint values (compiled and Python) carry the ring's bytes after the creation number
    if abs(count) < 2**63:
        want = [("V", b"[1]", fivm_state.encode_view_value(7, raw))]
        args = ("V", {(1,): None}, {(1,): p}, {(1,): 7}, RowCofactor, fivm_state.encode_key)
        assert kernels.py_view_entries(*args) == want
        if kernels.compiled is not None:
            assert kernels.compiled.view_entries(*args) == want


KEY_ITEM = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(10**15), 10**15).map(float),
    st.sampled_from([-0.0, 0.0, 1e15, -1e15, 999999999999999.0, 1e16, 0.5]),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)


@st.composite
def views(draw: Any) -> tuple[View, dict[Any, None]]:
    """A view of row payloads (one batch's columns) and plain ones, and a change log naming some of its
    keys and some it no longer holds."""
    keys = draw(
        st.lists(st.tuples(KEY_ITEM) | st.tuples(KEY_ITEM, KEY_ITEM) | st.just(()), unique=True, max_size=8)
    )
    view = View("V", ("a",), lambda a, b: a, lambda a: False)
    k, lo = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    n = len(keys)
    lifts = [draw(st.lists(ANY_FLOAT, min_size=k, max_size=k)) for _ in range(n)]
    block = CofactorRows(
        lo,
        np.asarray([draw(st.integers(-(2**40), 2**40)) for _ in range(n)], dtype=np.int64),
        np.asarray(lifts, dtype=np.float64).reshape(n, k),
        np.asarray(
            [
                products_of_sums(s)
                if draw(st.booleans())
                else draw(st.lists(ANY_FLOAT, min_size=tri_size(k), max_size=tri_size(k)))
                for s in lifts
            ],
            dtype=np.float64,
        ).reshape(n, tri_size(k)),
    )
    rows = kernels.py_payload_rows(RowCofactor, list(keys), lo, block.counts.tolist(), block)
    for i, (key, row) in enumerate(rows):
        payload = row if draw(st.booleans()) else Cofactor(lo, 1, lifts[i], products_of_sums(lifts[i]))
        view.data[key] = payload
        view.seq[key] = draw(st.integers(0, 2**64 - 1))
    gone = draw(st.lists(st.tuples(st.integers(10**6, 10**7)), max_size=3))
    log = dict.fromkeys(draw(st.permutations(list(keys) + gone)))
    return view, log


def one_at_a_time(ring: CofactorRing, view: View, keys: Any) -> list[tuple[str, bytes, bytes | None]]:
    out = []
    for key in keys:
        p = view.data.get(key)
        try:
            encoded = fivm_state.encode_key(key)
        except TypeError:  # an int past 64 bits: orjson refuses it, and so must the pass
            return []
        out.append(
            ("V", encoded, None if p is None else fivm_state.encode_view_value(view.seq[key], ring.encode(p)))
        )
    return out


@settings(max_examples=200, deadline=None)
@given(views())
def test_view_entries_equal_each_entry_encoded_alone(case):
    view, log = case
    ring = CofactorRing([f"v{i}" for i in range(8)])
    for keys in (log, view.data):
        want = one_at_a_time(ring, view, keys)
        forms = [kernels.py_view_entries] + ([kernels.compiled.view_entries] if kernels.compiled else [])
        for form in forms:
            if not want and keys:
                try:
                    form("V", keys, view.data, view.seq, RowCofactor, fivm_state.encode_key)
                except TypeError:
                    continue
                raise AssertionError(f"{form} encoded a key orjson refuses")
            assert form("V", keys, view.data, view.seq, RowCofactor, fivm_state.encode_key) == want
        if want or not keys:
            assert fivm_state.view_entries(ring, "V", keys, view) == want


def test_view_entries_leave_counts_past_int64_to_python():
    ring = CofactorRing(["x"])
    view = View("V", ("a",), lambda a, b: a, lambda a: False)
    view.data[(1,)] = Cofactor(0, 2**64, [1.0], [1.0])
    view.seq[(1,)] = 3
    want = [("V", b"[1]", fivm_state.encode_view_value(3, ring.encode(view.data[(1,)])))]
    assert fivm_state.view_entries(ring, "V", view.data, view) == want


A = {"A": ["k", "x", "y"], "B": ["k", "z"]}
CONFIG = {"relations": A, "ring": "covariance", "features": ["x", "y", "z"]}
NUMBER = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e300, 1e-310, 7.25])
EVENT = st.builds(
    lambda rel, k, a, b, m: Ev(rel, {"k": k, "x": a, "y": b} if rel == "A" else {"k": k, "z": a}, m),
    st.sampled_from(["A", "B"]),
    st.sampled_from([1.0, 2.0, 3.0]),
    NUMBER,
    NUMBER,
    st.sampled_from([1, 1, 1, 2, -1]),
)


def in_full_form(entries: list[tuple[str, bytes, bytes]]) -> list[tuple[str, bytes, bytes]]:
    """The entries as the full form stores them: every rank-one value re-written with its products."""
    out = []
    for name, key, value in entries:
        if name.startswith("@"):
            out.append((name, key, value))
            continue
        seq, payload = value[:8], value[8:]
        lo, k, n = HEADER.unpack_from(payload)
        if k & TOP_BIT:
            k &= TOP_BIT - 1
            at = HEADER.size + n
            sums = list(struct.unpack_from(f"<{k}d", payload, at))
            count = int.from_bytes(payload[HEADER.size : at], "little", signed=True)
            payload = full_form(lo, count, sums, products_of_sums(sums))
        out.append((name, key, seq + payload))
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(EVENT, max_size=20), st.lists(EVENT, max_size=20))
def test_state_in_the_full_form_restores_and_continues_as_the_live_engine(first, then):
    live = FivmEngine(CONFIG)
    live.apply(first)
    entries = list(live.all_entries())
    old = FivmEngine(CONFIG)
    old.restore_entries(in_full_form(entries))
    new = FivmEngine(CONFIG)
    new.restore_entries(entries)
    assert old.snapshot() == new.snapshot() == live.snapshot()
    assert sorted(old.all_entries()) == sorted(entries)  # re-written in the rank-one form where it applies
    want = live.apply(then)
    assert old.apply(then) == want and new.apply(then) == want
    assert old.snapshot() == new.snapshot() == live.snapshot()
    assert repr(old.result()) == repr(new.result()) == repr(live.result())  # NaN products compare by text
