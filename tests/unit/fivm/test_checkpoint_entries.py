"""A checkpoint's entries are encoded a view at a time (one pass per view): they must be the bytes of
encoding each entry on its own (``encode_key``, ``encode_view_value`` of the ring's
``encode``), for every entry at the first checkpoint and for the changed ones after it, in the same
order, whatever the ring (the compiled float cofactor pass, the exact ring, a scalar ring)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivmstream.events import UpdateEvent as Ev
from ivmstream.services.fivm import kernels, state
from ivmstream.services.fivm.engine import FivmEngine

RELATIONS = {"A": ["k", "x"], "B": ["k", "y"]}
CONFIGS = [
    {"relations": RELATIONS, "ring": "covariance", "features": ["x", "y"]},
    {"relations": RELATIONS, "ring": "covariance", "features": ["x", "y"], "decimals": 2},
    {"relations": RELATIONS, "ring": "count", "free": ["x"]},
]

VALUE = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, 1e300, 7.25])
EVENT = st.builds(
    lambda rel, k, v, m: Ev(rel, {"k": k, "x" if rel == "A" else "y": v}, m),
    st.sampled_from(["A", "B"]),
    st.sampled_from([1.0, 2.0, 3.0, -0.0]),
    VALUE,
    st.sampled_from([1, 1, 2, -1]),
)


Entries = list[tuple[str, bytes, Any]]


def one_at_a_time(engine: FivmEngine, keys: dict[str, list[Any]] | None = None) -> Entries:
    """Each view entry encoded on its own (of the keys given, else of every key), in the view's order."""
    out: Entries = []
    ring = engine.ring
    for name, view in engine.maint.views.items():
        for key in view.data if keys is None else keys.get(name, []):
            payload = view.data.get(key)
            value = None if payload is None else state.encode_view_value(view.seq[key], ring.encode(payload))
            out.append((name, state.encode_key(key), value))
    return out


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CONFIGS), st.lists(EVENT, max_size=25), st.lists(EVENT, max_size=25))
def test_checkpoint_entries_equal_each_entry_encoded_alone(
    config: dict[str, Any], first: list[Ev], then: list[Ev]
) -> None:
    engine = FivmEngine(config)
    engine.apply(first)
    every = [e for e in engine.all_entries() if not e[0].startswith("@")]
    assert every == one_at_a_time(engine)
    assert len(every) == sum(len(v) for v in engine.maint.views.values())
    engine.apply(then)
    changed_keys = {name: list(view.changed) for name, view in engine.maint.views.items()}
    changed = [e for e in engine.changed_entries() if not e[0].startswith("@")]
    assert changed == one_at_a_time(engine, changed_keys)


# A payload whose attributes run Python code that drops the view's references to it and to its key: the
# compiled pass holds the key, payload and sequence number while it reads them (run in a child, so a
# use after free fails this test alone, as a crash).
DROPPING_PAYLOAD = """
import numpy as np
from ivmstream.services.fivm import kernels, state
from ivmstream.services.fivm.rings.cofactor import Cofactor, CofactorRing, RowCofactor

class Dropping:
    sums = np.array([1.5, 2.0])
    quad = np.array([2.25, 3.0, 4.5])

    def __del__(self):
        freed.append(self.sums)

    @property
    def count(self):  # read first
        data.clear()
        keys.clear()
        seq.clear()
        return 2

    @property
    def lo(self):  # read after count: the payload must still be alive
        assert not freed, "the pass read a payload it had let go"
        return 0

want = [("V", b"[1000000000000]", state.encode_view_value(7, CofactorRing(["a", "b"]).encode(
    Cofactor(0, 2, np.array([1.5, 2.0]), np.array([2.25, 3.0, 4.5])))))]
for form in (kernels.compiled.view_entries, kernels.py_view_entries):
    key = (10**12,)
    data, keys, seq, freed = {key: Dropping()}, {key: None}, {key: 7}, []
    del key
    assert form("V", keys, data, seq, RowCofactor, state.encode_key) == want, form
print("ok")
"""


def test_view_entries_hold_what_a_payloads_attributes_may_drop() -> None:
    if kernels.compiled is None:
        pytest.fail("the compiled F-IVM kernels are not built (test_fivm_kernels says how to build them)")
    out = subprocess.run([sys.executable, "-c", DROPPING_PAYLOAD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
