"""Synthetic workloads of the triangle benchmark and an independent brute-force oracle.

What each workload exposes: docs/triangles/algorithm.md §7.

Everything is deterministic: closed-form constructions, or ``random.Random(seed)`` (ids are ints, so
``PYTHONHASHSEED`` does not matter). Relations are Z-relations ``{(x, y): multiplicity}``.

- ``w_hub(n)``: S = {(b*, c_i)}, T = {(c_i, a*)}, i < K, plus R(a*, b*); the stream toggles R(a*, b*).
- ``w_mix(n, eps)``: W-hub plus k heavy C-values h_j of T-degree d = θ_strict(N, ε) + 2 (N = 2|D|+1,
  the threshold base BUILD will pick), each with (h_j, a*) ∈ T and (b*, h_j) ∈ S, k ≈ 2K/d; for ε < ½
  it is the same construction at that ε's threshold.
- ``w_light(n, eps)`` (ours; the mirror of W-mix for ε > ½): b* is light with the longest light row a
  strict partition allows, S(b*) = {(b*, c_i)} and T(c_i, a*) for i < θ_strict(N, ε) - 1, padded with
  unrelated T tuples up to |D| = n. At ε = 1 it is W-hub.
- ``w_adversarial(n, eps)``: ``w_mix`` for ε ≤ ½, ``w_light`` for ε > ½: a worst case for each ε.
- ``w_grow(n, seed)``: n distinct R-MAT tuples spread over R, S, T, inserted from empty in a random order,
  then deleted in another random order (every doubling and halving of N).
- ``graph_mix_events`` / ``graph_churn_events``: graph-mode edge streams for the end-to-end run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ivmstream.services.triangles.thresholds import thresholds

Rel = dict[tuple[int, int], int]
A_STAR, B_STAR = 1, 2  # the toggled tuple is R(a*, b*)
FIRST_FREE = 10  # every other value is a fresh int from here on

RMAT_PROBS = (0.57, 0.19, 0.19, 0.05)  # R-MAT a=0.57, b=c=0.19 (d = 0.05), the usual skewed setting


@dataclass
class Toggle:
    """A database D₀ for BUILD plus the tuple the stream toggles (-m, +m, -m, ...)."""

    name: str
    n: int  # |D₀|
    data: dict[str, Rel]
    toggle: tuple[str, int, int]  # (relation, x, y), present in D₀ with multiplicity 1
    meta: dict[str, Any] = field(default_factory=dict)
    cycle: tuple[tuple[str, int, int], ...] = ()  # several toggled tuples, updated in turn

    @property
    def toggles(self) -> tuple[tuple[str, int, int], ...]:
        return self.cycle or (self.toggle,)

    def expected_work(self, strategy: str) -> int:
        """Work units per toggle predicted from the construction (ivm-eps: see ``meta``)."""
        if strategy in self.meta.get("expected_work", {}):
            return self.meta["expected_work"][strategy]
        s, t = self.meta["s_row"], self.meta["t_col"]
        return {
            "first-order": min(s, t),
            "recompute": min(s, t),  # one R tuple: the recount intersects the same two rows
            "recursive": s + t + 1,
            "factorized": 1,
        }.get(strategy, self.meta.get("ivm_work", min(s, t)))


def _n_of(data: Mapping[str, Rel]) -> int:
    return sum(len(r) for r in data.values())


def _theta(n_base: int, eps: Fraction) -> int:
    return thresholds(n_base, eps).strict


def w_hub(n: int) -> Toggle:
    k_hub = (n - 1) // 2
    c = range(FIRST_FREE, FIRST_FREE + k_hub)
    data = {
        "R": {(A_STAR, B_STAR): 1},
        "S": {(B_STAR, ci): 1 for ci in c},
        "T": {(ci, A_STAR): 1 for ci in c},
    }
    pad = _pad(data, n)
    meta = {"K": k_hub, "padding": pad, "s_row": k_hub, "t_col": k_hub, "ivm_work": 1}
    return Toggle("W-hub", n, data, ("R", A_STAR, B_STAR), meta)


def _pad(data: dict[str, Rel], n: int) -> int:
    """Add unrelated light T tuples (fresh values) until |D| = n; returns how many were added."""
    pad = n - _n_of(data)
    base = 1 + max(max(t) for rel in data.values() for t in rel)
    for i in range(pad):
        data["T"][(base + 2 * i, base + 2 * i + 1)] = 1
    return pad


def w_mix(n: int, eps: Fraction = Fraction(1, 2)) -> Toggle:
    """|D₀| = n exactly, so BUILD picks N = 2n+1 and d = θ_strict(N, ε) + 2 is known up front."""
    theta = _theta(2 * n + 1, eps)
    d = theta + 2
    k = max(1, round(2 * ((n - 1) * d // (4 * d + 2)) / d))  # k ≈ 2K/d with 1 + 2K + k(d+1) ≈ n
    k_hub = (n - 1 - k * (d + 1)) // 2
    if k_hub < 1:
        raise ValueError(f"|D|={n} is too small for W-mix at eps={eps}")
    nxt = FIRST_FREE
    c = list(range(nxt, nxt + k_hub))
    nxt += k_hub
    h = list(range(nxt, nxt + k))
    nxt += k
    s_rel: Rel = {(B_STAR, ci): 1 for ci in c}
    t_rel: Rel = {(ci, A_STAR): 1 for ci in c}
    for hj in h:
        s_rel[(B_STAR, hj)] = 1
        t_rel[(hj, A_STAR)] = 1
        for _ in range(d - 1):
            t_rel[(hj, nxt)] = 1
            nxt += 1
    data = {"R": {(A_STAR, B_STAR): 1}, "S": s_rel, "T": t_rel}
    pad = _pad(data, n)
    meta = {
        "K": k_hub,
        "k_heavy": k,
        "d": d,
        "padding": pad,
        "N_build": 2 * n + 1,
        "theta_strict": theta,
        "s_row": k_hub + k,
        "t_col": k_hub + k,
        # a* light in R: hh over T_h(·, a*) (k rows) + V_ST lookup + V_TR maintenance over the same k;
        # at ε = 0 every C-value is heavy, so both walk all K + k.
        "ivm_work": 1 + 2 * k if eps > 0 else 1 + k_hub + k,
        "design_eps": str(eps),
    }
    return Toggle("W-mix", n, data, ("R", A_STAR, B_STAR), meta)


def w_light(n: int, eps: Fraction) -> Toggle:
    n_base = 2 * n + 1
    row = min(_theta(n_base, eps) - 1, (n - 1) // 2)
    c = range(FIRST_FREE, FIRST_FREE + row)
    data: dict[str, Rel] = {
        "R": {(A_STAR, B_STAR): 1},
        "S": {(B_STAR, ci): 1 for ci in c},
        "T": {(ci, A_STAR): 1 for ci in c},
    }
    pad = n - 1 - 2 * row
    base = FIRST_FREE + row
    for i in range(pad):  # unrelated light T tuples: they only set |D| (and so N and the thresholds)
        data["T"][(base + 2 * i, base + 2 * i + 1)] = 1
    size = _n_of(data)
    meta = {
        "light_row": row,
        "padding": pad,
        "N_build": 2 * size + 1,
        "theta_strict": _theta(2 * size + 1, eps),
        "s_row": row,
        "t_col": row,
        "ivm_work": 1 + row,  # the ll term walks S_l(b*, ·)
        "design_eps": str(eps),
    }
    return Toggle("W-light", size, data, ("R", A_STAR, B_STAR), meta)


C_STAR = 3


def w_all(n: int, eps: Fraction = Fraction(1, 2)) -> Toggle:
    """The all-relations adversarial mix: a W-mix gadget for each relation, toggled in turn.

    For the toggled tuple (x*, y*) of relation k: K hub paths next(y*, c)·prev(c, x*) through fresh
    light c, and k heavy values h of degree d = θ_strict(N, ε) + 2 in the previous relation with
    next(y*, h) and prev(h, x*): the rotations of W-mix (§7) around R(a*, b*), S(b*, c*), T(c*, a*).
    First-order intersects K-long rows on every update; a single-view plan (factorized) answers one
    relation by a lookup but maintains K-long rows on the other two; recursive maintains K-long rows on
    every update; IVM^ε does O(k) = O(√N) on each."""
    theta = _theta(2 * n + 1, eps)
    d = theta + 2
    third = n // 3
    k = max(1, round(2 * ((third - 1) * d // (4 * d + 2)) / d))
    k_hub = (third - 1 - k * (d + 1)) // 2
    if k_hub < 1:
        raise ValueError(f"|D|={n} is too small for W-all at eps={eps}")
    names = ("R", "S", "T")
    star = (A_STAR, B_STAR, C_STAR)  # R(a*, b*), S(b*, c*), T(c*, a*)
    data: dict[str, Rel] = {name: {} for name in names}
    nxt = FIRST_FREE
    toggles = []
    for j in range(3):
        rel, nrel, prel = names[j], names[(j + 1) % 3], names[(j + 2) % 3]
        x, y = star[j], star[(j + 1) % 3]
        data[rel][(x, y)] = 1
        toggles.append((rel, x, y))
        for _ in range(k_hub):
            data[nrel][(y, nxt)] = 1
            data[prel][(nxt, x)] = 1
            nxt += 1
        for _ in range(k):
            h = nxt
            nxt += 1
            data[nrel][(y, h)] = 1
            data[prel][(h, x)] = 1
            for _ in range(d - 1):
                data[prel][(h, nxt)] = 1
                nxt += 1
    pad = _pad(data, n)
    hub = k_hub + k
    meta = {
        "K": k_hub,
        "k_heavy": k,
        "d": d,
        "padding": pad,
        "N_build": 2 * n + 1,
        "theta_strict": theta,
        "s_row": hub,
        "t_col": hub,
        "ivm_work": 1 + 2 * k,
        "design_eps": str(eps),
        # per update, averaged over the three relations: factorized looks R up and maintains its view
        # over a hub row on S and T updates (after intersecting); recursive maintains two rows always
        "expected_work": {
            "factorized": (1 + 2 * (2 * hub)) // 3,
            "recursive": 2 * hub + 1,
            "first-order": hub,
            "recompute": 3 * n,
        },
    }
    return Toggle("W-all", n, data, toggles[0], meta, tuple(toggles))


def w_adversarial(n: int, eps: Fraction) -> Toggle:
    return w_mix(n, eps) if eps <= Fraction(1, 2) else w_light(n, eps)


# --------------------------------------------------------------------------- R-MAT and W-grow


def rmat_pairs(rng: random.Random, scale: int, count: int, probs: tuple[float, ...] = RMAT_PROBS):
    """``count`` R-MAT draws (x, y) in [0, 2^scale)² (with repeats): quadrant a/b/c/d per bit."""
    pa, pb, pc, _ = probs
    ab, abc = pa + pb, pa + pb + pc
    rnd = rng.random
    for _ in range(count):
        x = y = 0
        for _bit in range(scale):
            r = rnd()
            x <<= 1
            y <<= 1
            if r < pa:
                pass
            elif r < ab:
                y |= 1
            elif r < abc:
                x |= 1
            else:
                x |= 1
                y |= 1
        yield x, y


@dataclass
class Stream:
    """An update stream from the empty database: (relation, x, y, m) tuples, phase boundaries."""

    name: str
    n: int
    updates: list[tuple[str, int, int, int]]
    phases: dict[str, tuple[int, int]]  # phase -> [start, end) in ``updates``
    meta: dict[str, Any] = field(default_factory=dict)


def w_grow(n: int, seed: int = 7) -> Stream:
    """n distinct R-MAT tuples (n/3 per relation, one shared value space), insert all, delete all."""
    rng = random.Random(seed)
    per = [n // 3 + (1 if i < n % 3 else 0) for i in range(3)]
    scale = max(3, math.ceil(math.log2(max(per))) - 2)  # ~4 tuples per value on average, R-MAT skew
    tuples: list[tuple[str, int, int]] = []
    for name, want in zip(("R", "S", "T"), per, strict=True):
        seen: set[tuple[int, int]] = set()
        while len(seen) < want:
            for xy in rmat_pairs(rng, scale, want - len(seen)):
                if xy not in seen and len(seen) < want:
                    seen.add(xy)
        tuples += [(name, x, y) for x, y in sorted(seen)]
    rng.shuffle(tuples)
    deletes = list(tuples)
    rng.shuffle(deletes)
    updates = [(r, x, y, 1) for r, x, y in tuples] + [(r, x, y, -1) for r, x, y in deletes]
    return Stream(
        "W-grow/shrink",
        n,
        updates,
        {"grow": (0, n), "shrink": (n, 2 * n)},
        {"rmat_scale": scale, "rmat_probs": list(RMAT_PROBS), "per_relation": per, "seed": seed},
    )


def relations_of(updates: Iterable[tuple[str, int, int, int]]) -> dict[str, Rel]:
    """The Z-relations reached by applying the updates to the empty database."""
    data: dict[str, Rel] = {"R": {}, "S": {}, "T": {}}
    for rel, x, y, m in updates:
        r = data[rel]
        v = r.get((x, y), 0) + m
        if v:
            r[(x, y)] = v
        else:
            del r[(x, y)]
    return data


# --------------------------------------------------------------------------- oracle and cost estimates


def brute_force_count(data: Mapping[str, Rel]) -> int:
    """Q = Σ R(a,b)·S(b,c)·T(c,a): written independently of the engines (hash join, smaller row)."""
    s_by_b: dict[int, dict[int, int]] = {}
    for (b, c), m in data["S"].items():
        s_by_b.setdefault(b, {})[c] = m
    t_by_a: dict[int, dict[int, int]] = {}
    for (c, a), m in data["T"].items():
        t_by_a.setdefault(a, {})[c] = m
    q = 0
    for (a, b), m in data["R"].items():
        srow = s_by_b.get(b)
        tcol = t_by_a.get(a)
        if not srow or not tcol:
            continue
        if len(srow) > len(tcol):
            q += m * sum(mt * srow[c] for c, mt in tcol.items() if c in srow)
        else:
            q += m * sum(ms * tcol[c] for c, ms in srow.items() if c in tcol)
    return q


def graph_brute_force(edges: Iterable[tuple[int, int]]) -> int:
    """Σ E(a,b)E(b,c)E(c,a) over the symmetric edge relation = 6 * #triangles (simple graph)."""
    adj: dict[int, set[int]] = {}
    for u, v in edges:
        adj.setdefault(u, set()).add(v)
        adj.setdefault(v, set()).add(u)
    tri = 0
    for u, nu in adj.items():
        for v in nu:
            if v > u:
                nv = adj[v]
                small, big = (nu, nv) if len(nu) <= len(nv) else (nv, nu)
                tri += sum(1 for w in small if w > v and w in big)
    return 6 * tri


def join_costs(data: Mapping[str, Rel]) -> dict[str, int]:
    """Sizes that drive the baselines' costs on a database: recount work and the full views' sizes.

    ``recount``: Σ_{(a,b)∈R} min(|S(b,·)|, |T(·,a)|) (the O(N^{3/2}) plan, i.e. one recompute);
    ``fo_sum``: Σ over all tuples of the first-order intersection size (≈ inserting D tuple by tuple);
    ``maint_sum``: Σ over all tuples of the two full rows a recursive (DBToaster-style) update walks;
    ``wedges_*``: entries of the full views W_RS, W_ST, W_TR (recursive keeps all three, factorized W_ST)."""
    out_deg = {name: _degrees(rel, 0) for name, rel in data.items()}
    in_deg = {name: _degrees(rel, 1) for name, rel in data.items()}
    recount = sum(min(out_deg["S"].get(b, 0), in_deg["T"].get(a, 0)) for a, b in data["R"])
    fo_sum = recount
    fo_sum += sum(min(out_deg["T"].get(c, 0), in_deg["R"].get(b, 0)) for b, c in data["S"])
    fo_sum += sum(min(out_deg["R"].get(a, 0), in_deg["S"].get(c, 0)) for c, a in data["T"])

    def wedges(left: str, right: str) -> int:  # Σ_y |left(·, y)|·|right(y, ·)|
        return sum(d * out_deg[right].get(y, 0) for y, d in in_deg[left].items())

    maint_sum = sum(out_deg["S"].get(b, 0) + in_deg["T"].get(a, 0) for a, b in data["R"])
    maint_sum += sum(out_deg["T"].get(c, 0) + in_deg["R"].get(b, 0) for b, c in data["S"])
    maint_sum += sum(out_deg["R"].get(a, 0) + in_deg["S"].get(c, 0) for c, a in data["T"])
    return {
        "recount": recount,
        "fo_sum": fo_sum,
        "maint_sum": maint_sum,
        "wedges_RS": wedges("R", "S"),
        "wedges_ST": wedges("S", "T"),
        "wedges_TR": wedges("T", "R"),
    }


def _degrees(rel: Rel, pos: int) -> dict[int, int]:
    deg: dict[int, int] = {}
    for t in rel:
        v = t[pos]
        deg[v] = deg.get(v, 0) + 1
    return deg


# --------------------------------------------------------------------------- graph-mode streams (end to end)


def graph_mix_events(n_edges: int, toggles: int) -> tuple[list[tuple[int, int, int]], dict[str, Any]]:
    """W-mix on an undirected graph, built by inserts from empty (shuffled), then edge (a*, b*) toggled.

    Hub: paths b*, c_i, a* for i < K; k heavy vertices h_j adjacent to a* and b*, each with degree d chosen
    above θ_up at the largest N the stream can reach (N ≤ 4|D|), so they end heavy whatever the N-epoch.
    Edge (a*, b*) is absent after an even number of toggles."""
    size = 2 * (n_edges + 1)  # |D| counts both directions of every edge
    d = math.ceil(1.5 * math.isqrt(4 * size)) + 4
    k = max(1, round(n_edges / (2 * d)))  # k·d ≈ 2K edges of heavy vertices, 2K hub edges
    k_hub = max(1, (n_edges - k * d) // 2)
    edges: list[tuple[int, int]] = []
    nxt = FIRST_FREE
    for _ in range(k_hub):
        edges += [(B_STAR, nxt), (nxt, A_STAR)]
        nxt += 1
    for _ in range(k):
        h = nxt
        nxt += 1
        edges += [(h, A_STAR), (B_STAR, h)]
        for _ in range(d - 2):
            edges.append((h, nxt))
            nxt += 1
    random.Random(11).shuffle(edges)
    events = [(u, v, 1) for u, v in edges]
    events += [(A_STAR, B_STAR, 1 if i % 2 == 0 else -1) for i in range(toggles)]
    meta = {"K": k_hub, "k_heavy": k, "d": d, "edges": len(edges), "toggles": toggles}
    return events, meta


def graph_churn_events(
    warm: int, churn: int, seed: int = 5
) -> tuple[list[tuple[int, int, int]], dict[str, Any]]:
    """L3 churn on an undirected R-MAT graph: ``warm`` inserts, then ``churn`` steps, each deleting a
    uniformly random present edge or inserting a new R-MAT edge with probability ½. Always valid under
    the graph service's set semantics (no self-loops, no duplicate inserts, no absent deletes)."""
    rng = random.Random(seed)
    scale = max(4, math.ceil(math.log2(warm)) - 1)
    present: list[tuple[int, int]] = []
    where: dict[tuple[int, int], int] = {}
    events: list[tuple[int, int, int]] = []

    def fresh_edge() -> tuple[int, int]:
        while True:
            ((x, y),) = rmat_pairs(rng, scale, 1)
            e = (min(x, y), max(x, y))
            if x != y and e not in where:
                return e

    def insert(e: tuple[int, int]) -> None:
        where[e] = len(present)
        present.append(e)
        events.append((e[0], e[1], 1))

    for _ in range(warm):
        insert(fresh_edge())
    for _ in range(churn):
        if present and rng.random() < 0.5:
            i = rng.randrange(len(present))
            e = present[i]
            last = present.pop()
            if i < len(present):
                present[i] = last
                where[last] = i
            del where[e]
            events.append((e[1], e[0], -1) if rng.random() < 0.5 else (e[0], e[1], -1))
        else:
            insert(fresh_edge())
    meta = {"rmat_scale": scale, "warm_inserts": warm, "churn_steps": churn, "final_edges": len(present)}
    return events, meta


def final_edges(events: Iterable[tuple[int, int, int]]) -> set[tuple[int, int]]:
    edges: set[tuple[int, int]] = set()
    for u, v, m in events:
        e = (min(u, v), max(u, v))
        if m > 0:
            edges.add(e)
        else:
            edges.discard(e)
    return edges
