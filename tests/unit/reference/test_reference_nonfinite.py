"""The reference service's column sums are stored as text (``str`` of the number), so a float sum that
overflowed to ±inf survives a checkpoint's entries and a snapshot exactly: the restored engine continues
like the live one. (NaN cannot arise: every addend is a finite event value, and inf plus a finite
number stays inf.)"""

from __future__ import annotations

import math
from typing import Any

import pytest

from ivmstream.config import build_config
from ivmstream.events import UpdateEvent
from ivmstream.service import load_service

BIG = 1e308
CONFIG = {"relations": {"up": {"id": "int", "x": "float"}, "down": {"id": "int", "x": "float"}}}
# up: BIG + BIG = inf; down: -BIG - BIG = -inf
STREAM = [
    ("up", {"id": 1, "x": BIG}, 1),
    ("up", {"id": 2, "x": BIG}, 1),
    ("down", {"id": 1, "x": -BIG}, 1),
    ("down", {"id": 2, "x": -BIG}, 1),
    ("down", {"id": 3, "x": -0.0}, 1),
]
# after the cut: up's inf - BIG (a delete) stays inf, down's -inf + 1.0 stays -inf
LATER = [("up", {"id": 1, "x": BIG}, -1), ("down", {"id": 4, "x": 1.0}, 1)]


def _engine() -> Any:
    service = load_service("reference")
    return service.engine(build_config(service, CONFIG).options)


def _apply(engine: Any, events: list[tuple[str, dict[str, Any], int]]) -> None:
    engine.apply([UpdateEvent(rel, row, delta) for rel, row, delta in events])


def _sums(engine: Any) -> dict[str, float]:
    return {r: body["sums"]["x"] for r, body in engine.result()["relations"].items()}


@pytest.mark.parametrize("how", ["entries", "snapshot"])
def test_infinite_sums_survive_a_restore(how: str) -> None:
    live = _engine()
    _apply(live, STREAM)
    assert _sums(live) == {"up": math.inf, "down": -math.inf}
    restored = _engine()
    if how == "entries":
        restored.restore_entries(list(live.all_entries()))
    else:
        restored.restore(live.snapshot())
    assert _sums(restored) == {"up": math.inf, "down": -math.inf}
    _apply(restored, LATER)
    _apply(live, LATER)
    assert _sums(restored) == _sums(live) == {"up": math.inf, "down": -math.inf}
    assert restored.result() == live.result()
