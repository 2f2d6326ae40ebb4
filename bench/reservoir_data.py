"""Graphs for the reservoir benchmarks and demo: a directed Chung-Lu graph with heavy-tailed degrees.

Node i gets the weight (i + 1)^(-1/(gamma-1)) (nodes in a random order) for both directions, and each
edge draws its source and its target by weight; repeated edges and self-loops are dropped. With
gamma = 1.9 the degrees resemble a who-trusts-whom network like Epinions: a few hubs with thousands of
edges both ways (in- and out-degree correlate), most nodes with one or two. Deterministic from the
seed. The line-3 size is checked with
Σ_{(y,z)∈E} indeg(y)·outdeg(z).

``python -m bench.reservoir_data --demo`` writes the service's bundled demo input.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
from collections import Counter
from pathlib import Path

import orjson

DEMO = Path(__file__).resolve().parents[1] / "services" / "reservoir" / "data" / "graph.jsonl"


def chung_lu(nodes: int, edges: int, gamma: float = 1.9, seed: int = 7) -> list[tuple[int, int]]:
    """``edges`` distinct directed edges (no self-loops) in arrival order, shuffled."""
    rng = random.Random(seed)
    weights = [(i + 1) ** (-1.0 / (gamma - 1.0)) for i in range(nodes)]
    outs = list(range(nodes))
    rng.shuffle(outs)
    ins = outs  # hubs are hubs both ways
    cum = list(itertools.accumulate(weights))
    total = cum[-1]
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, int]] = []
    while len(out) < edges:
        s = outs[bisect.bisect_left(cum, rng.random() * total)]
        d = ins[bisect.bisect_left(cum, rng.random() * total)]
        if s != d and (s, d) not in seen:
            seen.add((s, d))
            out.append((s, d))
    return out


def line3_size(edges: list[tuple[int, int]]) -> int:
    """|G ⋈ G ⋈ G| (walks of length 3) without enumerating them."""
    indeg = Counter(d for _, d in edges)
    outdeg = Counter(s for s, _ in edges)
    return sum(indeg[y] * outdeg[z] for y, z in edges)


def write_demo(path: Path = DEMO) -> None:
    """Two small graphs (keys "g1", "g2") interleaved, each edge once, a few edges sent twice."""
    rng = random.Random(5)
    lines = []
    for key, seed in (("g1", 1), ("g2", 2)):
        for s, d in chung_lu(60, 220, seed=seed):
            lines.append({"relation": "edges", "row": {"src": s, "dst": d, "graph": key}, "delta": 1})
    lines += rng.sample(lines, 12)  # set semantics: repeats change nothing
    rng.shuffle(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", action="store_true", help="write the service's demo input")
    args = parser.parse_args()
    if args.demo:
        write_demo()
        print(DEMO)
