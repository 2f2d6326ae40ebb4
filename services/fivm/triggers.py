"""Trigger plans: how a delta entering a leaf climbs to the root, compiled once per query.

docs/fivm/algorithm.md §2.5. For every leaf (a relation occurrence, or an indicator projection) the
plan lists, for each view on the path to the root, the siblings to join with and how to find the
matching sibling entries: a point lookup when the variables bound so far cover the sibling's keys, an
index on the bound variables otherwise, a scan when nothing is bound (a Cartesian product). The
indexes each view needs follow from the plans (§2.5) and are created once.

A partial join row is a tuple of variable values (the delta's keys, then each sibling's new keys);
payloads are collected per child and multiplied in the parent's product order, the lift of the
parent's variable last: block-layout rings need every partial product to cover contiguous preorder
ranges (docs/fivm/algorithm.md §2.8).
"""

from __future__ import annotations

from dataclasses import dataclass

from ivmstream.services.fivm.query import Query
from ivmstream.services.fivm.viewtree import INDICATOR, LEAF, ViewNode, ViewTree

GET = 0
INDEX = 1
SCAN = 2


@dataclass(frozen=True)
class Probe:
    view: str
    mode: int  # GET, INDEX or SCAN
    probe: tuple[int, ...]  # row positions of the bound sibling keys (GET: all, in key order; INDEX: bound)
    index: tuple[int, ...]  # INDEX: the sibling key positions the index is on
    extend: tuple[int, ...]  # sibling key positions of variables the row does not have yet


@dataclass(frozen=True)
class Step:
    view: str  # the parent view this step computes the delta of
    probes: tuple[Probe, ...]
    mul_order: tuple[int, ...]  # payload slots (0 = the delta, i = probe i) in product order
    out: tuple[int, ...]  # row positions of the parent's keys
    lift_pos: int  # row position of the parent's variable when it is lifted, else -1
    lift_var: str


@dataclass(frozen=True)
class LeafPlan:
    leaf: str  # the leaf view
    kind: str  # LEAF or INDICATOR
    occurrence: str
    key_pos: tuple[int, ...]  # positions in the base tuple of the leaf's keys
    lifted: tuple[tuple[str, int], ...]  # LEAF: composed lifted variables and their tuple positions
    steps: tuple[Step, ...]


def compile_plan(tree: ViewTree, leaf: ViewNode, query: Query) -> LeafPlan:
    occ = next(o for o in query.occurrences if o.name == leaf.relation)
    col = {c: i for i, c in enumerate(occ.columns)}
    steps: list[Step] = []
    node = leaf
    while node.parent is not None:
        parent = node.parent
        row_vars = list(node.keys)
        slot_of = {id(c): i for i, c in enumerate(parent.children)}
        slots = [slot_of[id(node)]]
        remaining = [c for c in parent.children if c is not node]
        probes: list[Probe] = []
        while remaining:
            bound = set(row_vars)
            # Point lookups first, then the sibling sharing most bound variables, then product order.
            sib = max(
                remaining,
                key=lambda c: (set(c.keys) <= bound, len(set(c.keys) & bound), -slot_of[id(c)]),
            )
            remaining.remove(sib)
            slots.append(slot_of[id(sib)])
            pos = {v: i for i, v in enumerate(row_vars)}
            bound_idx = tuple(i for i, v in enumerate(sib.keys) if v in bound)
            extend = tuple(i for i, v in enumerate(sib.keys) if v not in bound)
            if not extend:
                probes.append(Probe(sib.name, GET, tuple(pos[v] for v in sib.keys), (), ()))
            elif not bound_idx:
                probes.append(Probe(sib.name, SCAN, (), (), extend))
            else:
                probe = tuple(pos[sib.keys[i]] for i in bound_idx)
                probes.append(Probe(sib.name, INDEX, probe, bound_idx, extend))
            row_vars.extend(sib.keys[i] for i in extend)
        pos = {v: i for i, v in enumerate(row_vars)}
        lift = parent.lift and parent.var is not None
        steps.append(
            Step(
                view=parent.name,
                probes=tuple(probes),
                mul_order=tuple(sorted(range(len(slots)), key=slots.__getitem__)),
                out=tuple(pos[v] for v in parent.keys),
                lift_pos=pos[parent.var] if lift and parent.var is not None else -1,
                lift_var=parent.var or "",
            )
        )
        node = parent
    lifted = tuple((v, col[v]) for v in leaf.composed_lifted) if leaf.kind == LEAF else ()
    return LeafPlan(
        leaf=leaf.name,
        kind=leaf.kind,
        occurrence=occ.name,
        key_pos=tuple(col[v] for v in leaf.keys),
        lifted=lifted,
        steps=tuple(steps),
    )


def compile_plans(tree: ViewTree, query: Query) -> dict[str, list[LeafPlan]]:
    """Base relation -> the plans of its leaves, in the order an update runs them (§2.6): each
    occurrence's own leaf (configuration order), then its indicator leaves."""
    out: dict[str, list[LeafPlan]] = {r.name: [] for r in query.relations}
    for occ in query.occurrences:
        for leaf in tree.leaves(occ.name):
            if leaf.kind in (LEAF, INDICATOR):
                out[occ.base].append(compile_plan(tree, leaf, query))
    for base, plans in out.items():
        out[base] = [p for p in plans if p.kind == LEAF] + [p for p in plans if p.kind == INDICATOR]
    return out


def required_indexes(
    plans: dict[str, list[LeafPlan]], relations: set[str]
) -> dict[str, set[tuple[int, ...]]]:
    """View -> the index positions the plans of ``relations`` probe (§2.5)."""
    out: dict[str, set[tuple[int, ...]]] = {}
    for base in relations:
        for plan in plans[base]:
            for step in plan.steps:
                for probe in step.probes:
                    if probe.mode == INDEX:
                        out.setdefault(probe.view, set()).add(probe.index)
    return out
