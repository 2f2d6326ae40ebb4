"""The paper's graph workloads (§6.1): an Epinions-like graph, the line-k, star-k and dumbbell queries,
and the streams that feed them, either as the paper builds them or by the service's fan-out.

* ``epinions_like``: a directed Chung-Lu graph whose node weights follow ``(i + 1)^-ALPHA`` (one weight
  per node for both directions, nodes in a random order), with ALPHA fitted so the graph at Epinions'
  published size (75,879 nodes, 508,837 edges) has Epinions' line-3 size, 3,721,042,797 walks (the
  paper's count): ``fit_alpha`` redoes the fit. A smaller graph keeps Epinions' 6.7 edges per node and
  the exponent. ``bench/reservoir_data.chung_lu`` (gamma 1.9) is the far more skewed graph beside it.
* Streams: ``copies`` is the paper's (every alias relation receives its own shuffled copy of the edge
  set, all copies interleaved in one uniformly shuffled stream); ``fanout`` sends each edge once to a
  base relation that the service fans out to every alias, one after another.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ivmstream.events import UpdateEvent

EPINIONS_NODES, EPINIONS_EDGES, EPINIONS_LINE3 = 75_879, 508_837, 3_721_042_797
ALPHA = 0.687  # fit_alpha(): line-3 of the full-size graph within 1 % of EPINIONS_LINE3
Edge = tuple[int, int]


def epinions_like(edges: int, seed: int = 7, alpha: float = ALPHA, nodes: int | None = None) -> list[Edge]:
    """``edges`` distinct directed edges without self-loops, in a shuffled arrival order."""
    n = nodes or max(10, round(edges * EPINIONS_NODES / EPINIONS_EDGES))
    rng = np.random.default_rng(seed)
    cum = np.cumsum((np.arange(n) + 1.0) ** (-alpha))
    cum /= cum[-1]
    order = rng.permutation(n)  # hubs are hubs both ways, at random node ids
    seen: set[Edge] = set()
    out: list[Edge] = []
    while len(out) < edges:
        m = int((edges - len(out)) * 1.3) + 100
        src = order[np.searchsorted(cum, rng.random(m))].tolist()
        dst = order[np.searchsorted(cum, rng.random(m))].tolist()
        for e in zip(src, dst, strict=True):
            if e[0] != e[1] and e not in seen:
                seen.add(e)
                out.append(e)
                if len(out) == edges:
                    break
    return out


def line3_size(edges: Sequence[Edge]) -> int:
    indeg = Counter(d for _, d in edges)
    outdeg = Counter(s for s, _ in edges)
    return sum(indeg[y] * outdeg[z] for y, z in edges)


def degree_stats(edges: Sequence[Edge]) -> dict[str, Any]:
    """What the report shows of a graph's shape: sizes, maximum degrees and |line-3|."""
    indeg = Counter(d for _, d in edges)
    outdeg = Counter(s for s, _ in edges)
    return {
        "edges": len(edges),
        "nodes": len(set(indeg) | set(outdeg)),
        "max_in_degree": max(indeg.values()),
        "max_out_degree": max(outdeg.values()),
        "line3": line3_size(edges),
    }


def fit_alpha(lo: float = 0.6, hi: float = 0.8, steps: int = 8) -> float:
    """Bisect the exponent so the full-size graph's line-3 size is Epinions' (several seconds a step)."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        if line3_size(epinions_like(EPINIONS_EDGES, alpha=mid, nodes=EPINIONS_NODES)) < EPINIONS_LINE3:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- queries -------------------------------------------------------------------------------------


def _query(rels: dict[str, list[str]], k: int, strategy: str, stream: str) -> dict[str, Any]:
    out: dict[str, Any] = {"relations": rels, "k": k, "strategy": strategy}
    if stream == "fanout":
        out["aliases"] = dict.fromkeys(rels, "E")
        out["base_columns"] = {"E": ["src", "dst"]}
    return out


def line(length: int, k: int, strategy: str, stream: str = "copies") -> dict[str, Any]:
    """Directed walks with ``length`` edges: G1(x1, x2), G2(x2, x3), ..."""
    rels = {f"G{i + 1}": [f"x{i + 1}", f"x{i + 2}"] for i in range(length)}
    return _query(rels, k, strategy, stream)


def star(arms: int, k: int, strategy: str, stream: str = "copies") -> dict[str, Any]:
    """``arms`` edges leaving one node: Gi(s, di)."""
    return _query({f"G{i + 1}": ["s", f"d{i + 1}"] for i in range(arms)}, k, strategy, stream)


def dumbbell(k: int, strategy: str, stream: str = "copies") -> dict[str, Any]:
    """Two triangles joined by an edge (the paper's cyclic query); the decomposition is derived (§4.1):
    the triangles and the bridge."""
    rels = {
        "G1": ["x1", "x2"],
        "G2": ["x1", "x3"],
        "G3": ["x2", "x3"],
        "G7": ["x1", "x4"],
        "G4": ["x4", "x5"],
        "G5": ["x4", "x6"],
        "G6": ["x5", "x6"],
    }
    return _query(rels, k, strategy, stream)


GRAPH_QUERIES = {
    "line-3": lambda k, s, m: line(3, k, s, m),
    "line-4": lambda k, s, m: line(4, k, s, m),
    "line-5": lambda k, s, m: line(5, k, s, m),
    "star-4": lambda k, s, m: star(4, k, s, m),
    "star-5": lambda k, s, m: star(5, k, s, m),
    "star-6": lambda k, s, m: star(6, k, s, m),
    "dumbbell": lambda k, s, m: dumbbell(k, s, m),
}


# --- streams -------------------------------------------------------------------------------------


def copies_stream(query: dict[str, Any], edges: Sequence[Edge], seed: int = 11) -> list[UpdateEvent]:
    """The paper's stream: each alias relation gets every edge, all copies shuffled together."""
    events = [
        UpdateEvent(alias, dict(zip(cols, e, strict=True)), 1)
        for alias, cols in query["relations"].items()
        for e in edges
    ]
    random.Random(seed).shuffle(events)
    return events


def fanout_stream(edges: Sequence[Edge]) -> list[UpdateEvent]:
    """Each edge once, to the base relation E that every alias reads (the service's fan-out)."""
    return [UpdateEvent("E", {"src": s, "dst": d}, 1) for s, d in edges]


def stream_for(query: dict[str, Any], edges: Sequence[Edge], seed: int = 11) -> list[UpdateEvent]:
    return fanout_stream(edges) if "aliases" in query else copies_stream(query, edges, seed)
