"""The triangles engine factory: IVM^ε and every baseline, selectable by strategy name.

The algorithm and the baselines: docs/triangles/algorithm.md §2 and §4.

Pure and deterministic: no I/O. ``create_engine(mode, strategy, ...)`` is the one constructor the
service (through ``make_engine``), Spark bootstrap, benchmarks and tests use; the classes live in
``ivm_eps.py``, ``baselines.py`` and ``auto.py``, the exact threshold arithmetic in ``thresholds.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.triangles.auto import AutoEngine
from ivmstream.services.triangles.base import MODES, TriangleEngine
from ivmstream.services.triangles.baselines import (
    FactorizedEngine,
    FirstOrderEngine,
    RecomputeEngine,
    RecursiveEngine,
)
from ivmstream.services.triangles.ivm_eps import IvmEpsEngine

STRATEGIES: dict[str, type[TriangleEngine]] = {
    "auto": AutoEngine,
    "ivm-eps": IvmEpsEngine,
    "first-order": FirstOrderEngine,
    "factorized": FactorizedEngine,
    "recursive": RecursiveEngine,
    "recompute": RecomputeEngine,
}

DEFAULT_EPSILON = "1/2"


def create_engine(
    mode: str = "graph",
    strategy: str = "ivm-eps",
    epsilon: Any = None,
    always_iterate_s: bool = False,
) -> TriangleEngine:
    """An empty engine. ``epsilon``: ivm-eps only (default 1/2); ``always_iterate_s``: first-order only."""
    if mode not in MODES:
        raise EngineError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if strategy not in STRATEGIES:
        raise EngineError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    if epsilon is not None and strategy != "ivm-eps":
        raise EngineError(f"epsilon applies only to strategy 'ivm-eps', not {strategy!r}")
    if always_iterate_s and strategy != "first-order":
        raise EngineError(f"always_iterate_s applies only to strategy 'first-order', not {strategy!r}")
    if strategy == "ivm-eps":
        return IvmEpsEngine(mode, DEFAULT_EPSILON if epsilon is None else epsilon)
    if strategy == "first-order":
        return FirstOrderEngine(mode, always_iterate_s)
    return STRATEGIES[strategy](mode)


def make_engine(options: Mapping[str, Any]) -> TriangleEngine:
    """The service's engine factory: an empty engine for complete, validated options."""
    return create_engine(
        options["mode"], options["strategy"], options["epsilon"], options["always_iterate_s"]
    )
