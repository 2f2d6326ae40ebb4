"""The join a reservoir service's options describe (docs/reservoir/algorithm.md §1).

``relations`` declares the join's relation aliases by their columns (the natural join on shared
column names), in the platform's one form (``ivmstream.sdk.parse_relations``); a self-join alias
``{alias_of: R, columns: [...]}`` reads R's events, and the ``aliases`` option lets several aliases
read one base relation that is not itself in the join. The engine fans a base relation's events out
to each of its aliases in declaration order (§1.2). The index runs over *nodes*: one per alias, or one
per ``bags`` entry of a declared generalized hypertree decomposition for cyclic joins (§4). The join
tree over the nodes is derived here, never given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ivmstream.sdk import declared_aliases, relation_columns

STRATEGIES = ("rsjoin", "rsjoin-opt", "sjoin", "sjoin-opt", "symhj", "redraw", "rebuild")
# The types a reservoir cannot hold, and why (every other column type is sampled as given).
_NO_DECIMALS = "reservoir keeps sampled rows in JSON state, without exact decimals; declare float or str"
REFUSED_TYPES = dict.fromkeys(("decimal", "exact"), _NO_DECIMALS)
MERGING = ("rsjoin-opt", "sjoin-opt")  # the strategies that merge foreign-key joins (§2.8)


@dataclass(frozen=True)
class Node:
    """One index node: an alias, or a bag of aliases joined and materialised (§4)."""

    name: str
    attrs: tuple[str, ...]
    members: tuple[str, ...]  # the aliases it joins


@dataclass(frozen=True)
class Query:
    relations: dict[str, tuple[str, ...]]  # alias -> columns
    types: dict[str, str]  # column -> type
    bases: dict[str, tuple[str, ...]]  # base relation -> its columns
    fanout: dict[str, tuple[str, ...]]  # base relation -> its aliases, in declaration order
    columns: tuple[str, ...]  # the join result's columns
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int], ...]  # the join tree over nodes
    keys: dict[str, tuple[str, ...]]  # alias -> its declared key columns
    derived: str  # how the nodes came about: "aliases", "declared", "fk-merge" (§2.8) or "ghd" (§4)

    def neighbours(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.nodes]
        for a, b in self.edges:
            out[a].append(b)
            out[b].append(a)
        return out


def parse_query(options: Mapping[str, Any]) -> Query:
    """The join the options declare, its node tree, and every inconsistency as one ValueError."""
    rels: dict[str, tuple[str, ...]] = {}
    types: dict[str, str] = {}
    relations = options["relations"]
    plain = relation_columns(relations)
    self_joins = {a.name: a for a in declared_aliases(relations)}
    for alias in relations:
        if alias in plain:
            cols = tuple(plain[alias].items())
        else:
            of = self_joins[alias]
            read = plain[of.alias_of]
            if len(of.columns) != len(read):
                raise ValueError(f"alias {alias!r} renames {len(read)} columns of {of.alias_of}")
            cols = tuple(zip(of.columns, read.values(), strict=True))
        rels[alias] = tuple(c for c, _ in cols)
        for c, t in cols:
            if types.setdefault(c, t) != t:
                raise ValueError(f"column {c!r} is {types[c]} in one relation and {t} in {alias}")
    alias_of = dict(options["aliases"])
    for alias, base in alias_of.items():
        if alias not in rels:
            raise ValueError(f"aliases names {alias!r}, which is not one of the relations")
        if base in rels and base != alias:
            raise ValueError(f"base relation {base!r} of alias {alias!r} is itself a declared alias")
    for a in self_joins.values():
        if a.name in alias_of:
            raise ValueError(
                f"{a.name!r} is a self-join alias of {a.alias_of!r}; 'aliases' cannot name it too"
            )
        alias_of[a.name] = alias_of.get(a.alias_of, a.alias_of)
    fanout: dict[str, list[str]] = {}
    for alias in rels:
        fanout.setdefault(alias_of.get(alias, alias), []).append(alias)
    bases: dict[str, tuple[str, ...]] = {}
    declared = options["base_columns"]
    for base, aliases in fanout.items():
        arity = {len(rels[a]) for a in aliases}
        if len(arity) != 1:
            raise ValueError(
                f"the aliases of {base!r} ({', '.join(aliases)}) have different numbers of columns"
            )
        positional = {tuple(types[c] for c in rels[a]) for a in aliases}
        if len(positional) != 1:
            raise ValueError(f"the aliases of {base!r} ({', '.join(aliases)}) have different column types")
        own = tuple(declared[base]) if base in declared else rels[aliases[0]]
        if len(own) != len(rels[aliases[0]]):
            raise ValueError(f"base_columns of {base!r} must name {len(rels[aliases[0]])} columns")
        bases[base] = own
    unknown = sorted(set(declared) - set(bases))
    if unknown:
        raise ValueError(f"base_columns names {unknown[0]!r}, which no alias reads")
    out_cols: list[str] = []
    for cols_ in rels.values():
        out_cols += [c for c in cols_ if c not in out_cols]
    keys = _keys(rels, options["keys"])
    decomposition, derived = options["bags"], "declared"
    if decomposition is None:
        decomposition, derived = [[a] for a in rels], "aliases"
        if options["strategy"] in MERGING and keys:
            merged = fk_merge(rels, keys)
            if merged is not None and len(merged) < len(rels):
                decomposition, derived = merged, "fk-merge"
    if options["bags"] is None and join_tree([set(c) for c in rels.values()]) is None:
        decomposition, derived = cycle_bags(rels), "ghd"
    nodes = _nodes(rels, decomposition)
    edges = join_tree([set(n.attrs) for n in nodes])
    if edges is None:
        raise ValueError(
            "the declared 'bags' form a cyclic join: each bag a list of aliases, the bags an acyclic join, "
            "e.g. one bag per triangle for the dumbbell"
        )
    fan = {b: tuple(a) for b, a in fanout.items()}
    return Query(rels, types, bases, fan, tuple(out_cols), nodes, edges, keys, derived)


def _keys(
    rels: Mapping[str, tuple[str, ...]], declared: Mapping[str, list[str]]
) -> dict[str, tuple[str, ...]]:
    out = {}
    for alias, cols in declared.items():
        if alias not in rels:
            raise ValueError(f"keys names {alias!r}, which is not one of the relations")
        missing = [c for c in cols if c not in rels[alias]]
        if missing:
            raise ValueError(f"the key of {alias!r} names {missing[0]!r}, which is not one of its columns")
        out[alias] = tuple(cols)
    return out


def cycle_bags(rels: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    """A decomposition of a cyclic join (§4.1): the aliases of each cycle in one bag. Cycles are the
    biconnected components of the graph linking each alias to its columns; the aliases of a component
    that holds two or more form a bag (an alias on two such components joins both into one bag), every
    other alias is a bag of its own. One bag of everything if that still leaves a cycle."""
    names = list(rels)
    vertices = [("alias", a) for a in names] + sorted({("col", c) for cols in rels.values() for c in cols})
    number = {v: i for i, v in enumerate(vertices)}
    adjacency: list[list[int]] = [[] for _ in vertices]
    for a, cols in rels.items():
        for c in cols:
            adjacency[number[("alias", a)]].append(number[("col", c)])
            adjacency[number[("col", c)]].append(number[("alias", a)])
    group = list(range(len(names)))

    def find(x: int) -> int:
        while group[x] != x:
            x = group[x]
        return x

    for component in _biconnected(adjacency):
        members = sorted(v for v in component if v < len(names))
        for m in members[1:]:
            first, other = find(members[0]), find(m)
            group[max(first, other)] = min(first, other)
    out: dict[int, list[str]] = {}
    for i, alias in enumerate(names):
        out.setdefault(find(i), []).append(alias)
    derived = list(out.values())
    if join_tree([{c for a in bag for c in rels[a]} for bag in derived]) is None:
        return [names]
    return derived


def _biconnected(adjacency: Sequence[Sequence[int]]) -> list[set[int]]:
    """The vertex sets of the biconnected components (Hopcroft-Tarjan, iterative)."""
    n = len(adjacency)
    depth, low = [-1] * n, [0] * n
    out: list[set[int]] = []
    for root in range(n):
        if depth[root] >= 0:
            continue
        depth[root] = 0
        edges: list[tuple[int, int]] = []
        stack = [(root, -1, iter(adjacency[root]))]
        while stack:
            v, parent, it = stack[-1]
            for w in it:
                if depth[w] < 0:
                    depth[w] = low[w] = depth[v] + 1
                    edges.append((v, w))
                    stack.append((w, v, iter(adjacency[w])))
                    break
                if w != parent and depth[w] < depth[v]:
                    edges.append((v, w))
                    low[v] = min(low[v], depth[w])
            else:
                stack.pop()
                if parent < 0:
                    continue
                low[parent] = min(low[parent], low[v])
                if low[v] >= depth[parent]:
                    component: set[int] = set()
                    while True:
                        a, b = edges.pop()
                        component |= {a, b}
                        if (a, b) == (parent, v):
                            break
                    out.append(component)
    return out


def fk_merge(
    rels: Mapping[str, tuple[str, ...]], keys: Mapping[str, tuple[str, ...]]
) -> list[list[str]] | None:
    """Foreign-key merging (§2.8): each keyed alias S joins the bag of the first join-tree neighbour R
    (in declaration order) holding S's key columns, so each R tuple meets at most one S tuple and a bag
    holds at most as many tuples as its one unmerged alias. Contracting join-tree edges keeps the
    bags an acyclic join. None when the aliases' join is cyclic."""
    names = list(rels)
    edges = join_tree([set(rels[a]) for a in names])
    if edges is None:
        return None
    group = list(range(len(names)))

    def find(x: int) -> int:
        while group[x] != x:
            x = group[x]
        return x

    for s, alias in enumerate(names):
        key = keys.get(alias)
        if key is None:
            continue
        around = sorted(b if a == s else a for a, b in edges if s in (a, b))
        referencing = [r for r in around if set(key) <= set(rels[names[r]])]
        if referencing:
            a, b = find(s), find(referencing[0])
            group[max(a, b)] = min(a, b)
    out: dict[int, list[str]] = {}
    for i, alias in enumerate(names):
        out.setdefault(find(i), []).append(alias)
    return list(out.values())


def _nodes(
    rels: Mapping[str, tuple[str, ...]], decomposition: Sequence[Sequence[str]] | None
) -> tuple[Node, ...]:
    if decomposition is None:
        return tuple(Node(a, cols, (a,)) for a, cols in rels.items())
    seen = [a for bag in decomposition for a in bag]
    if sorted(seen) != sorted(rels):
        raise ValueError("'bags' must list every relation alias exactly once")
    out = []
    for bag in decomposition:
        attrs: list[str] = []
        for a in bag:
            attrs += [c for c in rels[a] if c not in attrs]
        out.append(Node("+".join(bag), tuple(attrs), tuple(bag)))
    return tuple(out)


def join_tree(attrs: Sequence[set[str]]) -> tuple[tuple[int, int], ...] | None:
    """A join tree over the nodes (maximum-weight spanning tree on shared attributes, ties by order),
    or None when none exists (the join is cyclic): then some attribute's nodes are disconnected."""
    n = len(attrs)
    candidates = sorted(
        ((-len(attrs[a] & attrs[b]), a, b) for a in range(n) for b in range(a + 1, n)),
    )
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges: list[tuple[int, int]] = []
    for _, a, b in candidates:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            edges.append((a, b))
    adjacency: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        adjacency[a].append(b)
        adjacency[b].append(a)
    for attr in set().union(*attrs) if attrs else ():
        holders = [i for i in range(n) if attr in attrs[i]]
        reached, todo = {holders[0]}, [holders[0]]
        while todo:
            x = todo.pop()
            for y in adjacency[x]:
                if y not in reached and attr in attrs[y]:
                    reached.add(y)
                    todo.append(y)
        if len(reached) != len(holders):
            return None
    return tuple(edges)
