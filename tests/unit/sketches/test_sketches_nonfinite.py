"""Operator state holding sums that stopped being finite (a product overflowing to ±inf) survives a
checkpoint's entries and a snapshot: the restored engine's sketch, answer and state continue like the
engine that never stopped (a non-finite sum written as JSON null would break the top-k and the
fragment counts after the restore)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.events.floats import state_bytes
from ivmstream.service import load_service

BIG = 1e308  # finite; BIG * 2.0 overflows to inf, -BIG * BIG to -inf
CONFIG = {
    "relations": {"t": {"g": "int", "x": "float"}, "u": {"h": "int", "y": "float"}},
    "query": "SELECT g, SUM(x * y) AS s FROM t, u WHERE t.g = u.h GROUP BY g ORDER BY s DESC LIMIT 2",
    "partition": {"t": {"column": "g", "ranges": 4, "domain": [0, 8]}},
    "strategy": "imp",
}
STREAM = [
    ("u", {"h": 1, "y": 2.0}, 1),
    ("t", {"g": 1, "x": BIG}, 1),  # group 1: inf
    ("t", {"g": 1, "x": BIG}, 1),
    ("t", {"g": 2, "x": -BIG}, 1),  # group 2: -inf
    ("u", {"h": 2, "y": BIG}, 1),
    ("t", {"g": 3, "x": -0.0}, 1),  # group 3: a signed zero
    ("u", {"h": 3, "y": 1.0}, 1),
    ("t", {"g": 5, "x": 7.0}, 1),
    ("u", {"h": 5, "y": 1.0}, 1),
]
LATER = [("t", {"g": 1, "x": 1.0}, 1), ("t", {"g": 2, "x": 1.0}, 1), ("u", {"h": 3, "y": 1.0}, -1)]


def _engine() -> Any:
    service = load_service("sketches")
    return service.engine(build_config(service, CONFIG).options)


def _apply(engine: Any, events: list[tuple[str, dict[str, Any], int]]) -> None:
    engine.apply([UpdateEvent(rel, row, delta) for rel, row, delta in events])


def _state(engine: Any) -> list[bytes]:
    """The answer, the sketch and every entry, floats compared exactly (NaN, ±inf and -0.0 included)."""
    return [state_bytes(engine.result()), *sorted(state_bytes([n, k, v]) for n, k, v in _decoded(engine))]


def _decoded(engine: Any) -> list[tuple[str, str, str]]:
    return [(n, k.decode(), v.decode()) for n, k, v in engine.all_entries()]


@pytest.mark.parametrize("how", ["entries", "snapshot"])
def test_a_restored_engine_with_infinite_sums_continues_like_the_live_one(how: str) -> None:
    live = _engine()
    _apply(live, STREAM)
    assert any("$float" in v for _n, _k, v in _decoded(live))  # the state holds a tagged infinity
    restored = _engine()
    if how == "entries":
        restored.restore_entries(list(live.all_entries()))
    else:
        restored.restore(live.snapshot())
    _apply(restored, LATER)
    _apply(live, LATER)
    assert _state(restored) == _state(live)
    top = live.result()["answer"]
    assert top[0][0] == 1 and top[0][1] == math.inf  # inf + 2.0 stays inf, first in DESC order
