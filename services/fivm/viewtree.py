"""View trees τ(ω, F), indicator projections and the materialization set μ(τ, U).

docs/fivm/algorithm.md §2.4 (view trees), §2.7 (μ) and §2.9 (indicator projections). A view tree has one
view per variable of the order, ``V@X``, keyed by dep(X) plus the free variables below X; it joins its
children and, when X is bound, marginalizes X (multiplying by the lift g_X). Leaves are the relations,
with the bound variables private to the relation composed into the leaf (§2.4). Free variables whose
view would equal its only child's are not repeated (§2.4).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ivmstream.services.fivm.order import OrderNode, VariableOrder, dependency_sets
from ivmstream.services.fivm.query import Query

LEAF = "leaf"
VAR = "var"
INDICATOR = "indicator"


@dataclass(eq=False)
class ViewNode:
    name: str
    kind: str  # LEAF (a relation occurrence), VAR (V@X) or INDICATOR (∃_keys R under X)
    keys: tuple[str, ...]
    var: str | None = None  # VAR: X
    marginalize: bool = False  # VAR: X is bound, summed out
    lift: bool = False  # VAR: X is bound and the ring lifts it
    relation: str | None = None  # LEAF / INDICATOR: the occurrence
    composed: tuple[str, ...] = ()  # LEAF: private bound variables summed out in the leaf (preorder)
    composed_lifted: tuple[str, ...] = ()  # LEAF: those of them the ring lifts
    children: list[ViewNode] = field(default_factory=list)
    parent: ViewNode | None = None
    rels: frozenset[str] = frozenset()  # occurrences whose changes reach this view

    def walk(self) -> Iterator[ViewNode]:
        """This subtree in preorder, children in product order."""
        yield self
        for c in self.children:
            yield from c.walk()


def view_name(var: str) -> str:
    return f"V@{var}"


def indicator_name(var: str, relation: str) -> str:
    return f"I@{var}:{relation}"


@dataclass
class ViewTree:
    roots: list[ViewNode]
    order: VariableOrder
    lifted: tuple[str, ...]  # lifted variables in view-tree preorder (the ring's numbering)
    key_order: tuple[str, ...]  # canonical variable order keys follow (the order's preorder)

    def nodes(self) -> Iterator[ViewNode]:
        for r in self.roots:
            yield from r.walk()

    def by_name(self) -> dict[str, ViewNode]:
        return {n.name: n for n in self.nodes()}

    def leaves(self, occurrence: str) -> list[ViewNode]:
        """The leaves an update to ``occurrence`` enters: its own leaf, then its indicator leaves."""
        own = [n for n in self.nodes() if n.kind == LEAF and n.relation == occurrence]
        ind = [n for n in self.nodes() if n.kind == INDICATOR and n.relation == occurrence]
        return own + ind

    def describe(self) -> list[dict[str, object]]:
        """Every view: name, keys, children (for stats, docs and tests)."""
        return [
            {"view": n.name, "keys": list(n.keys), "children": [c.name for c in n.children]}
            for n in self.nodes()
        ]


def build_view_tree(query: Query, order: VariableOrder) -> ViewTree:
    """τ(ω, F) (§2.4), with chain composition and shared free views and, when configured,
    indicator projections (§2.9)."""
    free = set(query.group_by)
    lifted = query.lifted
    dep = dependency_sets(order, query)
    schemas = {o.name: o.columns for o in query.occurrences}
    key_order = order.preorder()
    rank = {v: i for i, v in enumerate(key_order)}

    def sort_keys(vs: set[str]) -> tuple[str, ...]:
        return tuple(sorted(vs, key=rank.__getitem__))

    def subtree(n: OrderNode | str) -> tuple[set[str], set[str]]:
        """(relations, variables) below n."""
        if isinstance(n, str):
            return {n}, set()
        rels: set[str] = set()
        vs = {n.var}
        for c in n.children:
            r, v = subtree(c)
            rels |= r
            vs |= v
        return rels, vs

    def leaf(rel: str, composed: tuple[str, ...]) -> ViewNode:
        keys = tuple(v for v in key_order if v in schemas[rel] and v not in composed)
        return ViewNode(
            name=rel,
            kind=LEAF,
            keys=keys,
            relation=rel,
            composed=composed,
            composed_lifted=tuple(v for v in composed if v in lifted),
            rels=frozenset({rel}),
        )

    def build(n: OrderNode | str) -> ViewNode:
        if isinstance(n, str):
            return leaf(n, ())
        rels, vs = subtree(n)
        if n.var not in free and len(rels) == 1 and not (vs & free):
            (rel,) = rels
            chain = tuple(v for v in key_order if v in vs)
            return leaf(rel, chain)
        kids = [build(c) for c in n.children]
        keys = set(dep[n.var]) | (free & set().union(*(set(k.keys) for k in kids)))
        if n.var in free and len(kids) == 1 and set(kids[0].keys) == keys:
            return kids[0]  # §2.4: the view would equal its only child
        node = ViewNode(
            name=view_name(n.var),
            kind=VAR,
            keys=sort_keys(keys),
            var=n.var,
            marginalize=n.var not in free,
            lift=n.var not in free and n.var in lifted,
            children=kids,
            rels=frozenset().union(*(k.rels for k in kids)),
        )
        for k in kids:
            k.parent = node
        return node

    roots = [build(r) for r in order.roots]
    if query.indicators:
        for r in roots:
            _add_indicators(r, query, rank)
    lifted_pre: list[str] = []
    for r in roots:
        for n in r.walk():
            if n.kind == VAR and n.lift and n.var is not None:
                lifted_pre.append(n.var)
            lifted_pre.extend(n.composed_lifted)
    return ViewTree(roots, order, tuple(lifted_pre), key_order)


def _add_indicators(node: ViewNode, query: Query, rank: dict[str, int]) -> None:
    """ind(τ) of §2.9, bottom-up: under each V@X, add ∃_{sch(R)∩S} R for every relation R outside the
    subtree whose projection closes a cycle with the children (its hyperedge survives GYO reduction)."""
    if node.kind != VAR or node.var is None:
        return
    for c in node.children:
        _add_indicators(c, query, rank)
    s: set[str] = set().union(*(set(c.keys) for c in node.children))
    edges: list[tuple[str | None, frozenset[str]]] = [(None, frozenset(c.keys)) for c in node.children]
    cands: dict[str, frozenset[str]] = {}
    for o in query.occurrences:
        proj = frozenset(set(o.columns) & s)
        if o.name not in node.rels and proj:
            cands[o.name] = proj
            edges.append((o.name, proj))
    survivors = gyo_survivors(edges)
    added = [rel for rel in cands if rel in survivors]
    for rel in added:
        node.children.append(
            ViewNode(
                name=indicator_name(node.var, rel),
                kind=INDICATOR,
                keys=tuple(sorted(cands[rel], key=rank.__getitem__)),
                relation=rel,
                parent=node,
                rels=frozenset({rel}),
            )
        )
    up: ViewNode | None = node if added else None
    while up is not None:
        up.rels = frozenset().union(*(c.rels for c in up.children))
        up = up.parent


def gyo_survivors(edges: list[tuple[str | None, frozenset[str]]]) -> set[str]:
    """Labels of the labelled edges left non-empty by GYO reduction (§2.9): repeatedly drop vertices
    that occur in one edge only and edges contained in another edge. Of two equal edges the labelled
    one (else the later one) goes, so a projection that adds nothing is never kept."""
    live = [(label, set(vs)) for label, vs in edges]
    changed = True
    while changed:
        changed = False
        counts: dict[str, int] = {}
        for _, vs in live:
            for v in vs:
                counts[v] = counts.get(v, 0) + 1
        for _, vs in live:
            lonely = {v for v in vs if counts[v] == 1}
            if lonely:
                vs -= lonely
                changed = True
        keep: list[tuple[str | None, set[str]]] = []
        for i, (label, vs) in enumerate(live):
            dominated = not vs
            for j, (other, w) in enumerate(live):
                if dominated:
                    break
                if j == i or not w or not vs <= w:
                    continue
                drop_equal = (label is not None and other is None) or (
                    (label is None) == (other is None) and j < i
                )
                dominated = vs < w or drop_equal
            if dominated:
                changed = True
            else:
                keep.append((label, vs))
        live = keep
    return {label for label, vs in live if label is not None and vs}


def materialized(tree: ViewTree, updatable: set[str], distributed: bool = False) -> frozenset[str]:
    """μ(τ, U) of §2.7: every root, and every child some sibling of which can change. ``updatable`` holds
    occurrences (a relation's aliases and indicator leaves change with it). Distributed payloads keep
    every view."""
    if distributed:
        return frozenset(n.name for n in tree.nodes())
    out = {r.name for r in tree.roots}
    for n in tree.nodes():
        for i, c in enumerate(n.children):
            if any(j != i and (d.rels & updatable) for j, d in enumerate(n.children)):
                out.add(c.name)
    return frozenset(out)
