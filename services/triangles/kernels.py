"""The per-update loops of the triangle engines: sparse dot products over index rows (first-order IVM,
IVM^ε's deltas), IVM^ε's view steps, and the index update every strategy makes (``bump``).

Each is written here in Python, the reference, and compiled in ``_kernels.c`` (built by setup.py where
a C compiler is present). The module exports the compiled functions when they are built and
``IVMSTREAM_PURE_PYTHON`` is not ``1``, else the Python ones; both give the same results, down to the
views' iteration order (tests/unit/triangles/test_triangle_kernels.py).

A view step adds to V entry by entry and drops entries that reach 0. Each step has two equivalent loops,
chosen by the sign of m for speed only: a delete (m < 0) often cancels entries that inserts created, and
``pop`` finds and removes such an entry in one probe where a lookup plus ``del`` takes two (a surviving
entry is stored back); an insert reads with ``get`` and updates a surviving entry in place.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

Row = dict[Any, int]
Index = dict[Any, Row]
View = dict[tuple[Any, Any], int]

# Set to 1 to run the Python loops even where the compiled ones are built (as for the event decoder).
PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"


def py_dot(walk: Row, probe: Row) -> int:
    """Σ_c walk(c)·probe(c), walking ``walk`` and probing ``probe``."""
    d = 0
    get = probe.get
    for c, a in walk.items():
        b = get(c)
        if b is not None:
            d += a * b
    return d


def py_probe_dot(walk: Row, index: Index, x: Any) -> int:
    """Σ_c walk(c)·index(c, x), walking ``walk`` and probing the index's rows at x."""
    d = 0
    get = index.get
    for c, a in walk.items():
        prow = get(c)
        if prow is not None:
            b = prow.get(x)
            if b is not None:
                d += a * b
    return d


def py_light_pass(view: View, col: Row, y: Any, m: int, probe: Row | None) -> int:
    """V(c, y) += col(c)·m for every c in col, fused with ``dot(col, probe)`` (returned; 0 if no probe)."""
    d = 0
    if probe is None:
        if m < 0:
            pop = view.pop
            for c, b in col.items():
                key = (c, y)
                nv = pop(key, 0) + b * m
                if nv:
                    view[key] = nv
        else:
            vget = view.get
            for c, b in col.items():
                key = (c, y)
                nv = vget(key, 0) + b * m
                if nv:
                    view[key] = nv
                else:
                    del view[key]
        return d
    get = probe.get
    if m < 0:
        pop = view.pop
        for c, b in col.items():
            a = get(c)
            if a is not None:
                d += a * b
            key = (c, y)
            nv = pop(key, 0) + b * m
            if nv:
                view[key] = nv
    else:
        vget = view.get
        for c, b in col.items():
            a = get(c)
            if a is not None:
                d += a * b
            key = (c, y)
            nv = vget(key, 0) + b * m
            if nv:
                view[key] = nv
            else:
                del view[key]
    return d


def py_heavy_pass(view: View, x: Any, lrow: Row, m: int, plf: Index) -> int:
    """V(x, c) += m·lrow(c) for every c in lrow, fused with the ll delta Σ_c lrow(c)·plf(c, x) (returned)."""
    d = 0
    pget = plf.get
    if m < 0:
        pop = view.pop
        for c, a in lrow.items():
            prow = pget(c)
            if prow is not None:
                b = prow.get(x)
                if b is not None:
                    d += a * b
            key = (x, c)
            nv = pop(key, 0) + m * a
            if nv:
                view[key] = nv
    else:
        vget = view.get
        for c, a in lrow.items():
            prow = pget(c)
            if prow is not None:
                b = prow.get(x)
                if b is not None:
                    d += a * b
            key = (x, c)
            nv = vget(key, 0) + m * a
            if nv:
                view[key] = nv
            else:
                del view[key]
    return d


def py_bump(index: Index, x: Any, y: Any, m: int) -> int:
    """index[x][y] += m, dropping zero entries and empty rows; returns the support change (-1, 0, 1)."""
    row = index.get(x)
    if row is None:
        index[x] = {y: m}
        return 1
    old = row.get(y)
    if old is None:
        row[y] = m
        return 1
    new = old + m
    if new:
        row[y] = new
        return 0
    del row[y]
    if not row:
        del index[x]
    return -1


try:  # the compiled loops (setup.py); without a C compiler the Python ones above run
    from ivmstream.services.triangles import _kernels as compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    compiled = None  # type: ignore[assignment]

ACTIVE = "compiled" if compiled is not None and os.environ.get(PURE_PYTHON_ENV, "") != "1" else "python"

dot: Callable[[Row, Row], int] = py_dot
probe_dot: Callable[[Row, Index, Any], int] = py_probe_dot
light_pass: Callable[[View, Row, Any, int, Row | None], int] = py_light_pass
heavy_pass: Callable[[View, Any, Row, int, Index], int] = py_heavy_pass
bump: Callable[[Index, Any, Any, int], int] = py_bump
if ACTIVE == "compiled":
    dot, probe_dot, light_pass, heavy_pass = (
        compiled.dot,
        compiled.probe_dot,
        compiled.light_pass,
        compiled.heavy_pass,
    )
    bump = compiled.bump

__all__ = [
    "ACTIVE",
    "bump",
    "dot",
    "heavy_pass",
    "light_pass",
    "probe_dot",
    "py_bump",
    "py_dot",
    "py_heavy_pass",
    "py_light_pass",
    "py_probe_dot",
]
