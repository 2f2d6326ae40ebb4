"""Variable orders: the forest of join variables a view tree follows (docs/fivm/algorithm.md §2.1).

A variable order is a rooted forest with one node per variable such that the variables of every
relation lie on one root-to-leaf path; each relation hangs as a leaf under its lowest variable. Free
(group-by) variables must sit above bound ones on every path, or view keys blow up (§2.1).

The configuration may give an order as a nested mapping ``{var: {child: {...}}}``. It must name every
join variable and every free variable; a bound variable private to one relation may be left out, and
is then placed on a chain just above that relation's leaf (the view tree composes such chains into
the leaf, §2.4). Without a configured order, ``derive_order`` builds one with the heuristic of §2.3.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from ivmstream.sdk import EngineError
from ivmstream.services.fivm.query import Query


@dataclass
class OrderNode:
    """A variable; ``children`` in product order: variable nodes and relation names (leaves)."""

    var: str
    children: list[OrderNode | str] = field(default_factory=list)


@dataclass
class VariableOrder:
    roots: list[OrderNode | str]  # a relation without variables in the order is its own root
    derived: bool  # built by the heuristic rather than configured

    def nodes(self) -> Iterator[OrderNode]:
        """Variable nodes in preorder."""
        stack: list[OrderNode | str] = list(reversed(self.roots))
        while stack:
            n = stack.pop()
            if isinstance(n, OrderNode):
                yield n
                stack.extend(reversed(n.children))

    def preorder(self) -> tuple[str, ...]:
        return tuple(n.var for n in self.nodes())

    def ancestors(self) -> dict[str, tuple[str, ...]]:
        """Variable -> its ancestor variables, root first. Relations are left out: a relation may share
        its name with a variable (relation ``house`` with column ``house``)."""
        out: dict[str, tuple[str, ...]] = {}

        def walk(n: OrderNode | str, above: tuple[str, ...]) -> None:
            if isinstance(n, str):
                return
            out[n.var] = above
            for c in n.children:
                walk(c, (*above, n.var))

        for r in self.roots:
            walk(r, ())
        return out

    def to_json(self) -> dict[str, Any]:
        """The order in the configuration's format, relations as ``[Name]`` leaves: {var: {child: ..}}."""

        def dump(n: OrderNode | str) -> tuple[str, Any]:
            if isinstance(n, str):
                return f"[{n}]", {}
            return n.var, dict(dump(c) for c in n.children)

        return dict(dump(r) for r in self.roots)


def dependency_sets(order: VariableOrder, query: Query) -> dict[str, tuple[str, ...]]:
    """dep(X): the ancestors of X that occur in a relation below X (§2.1), root first."""
    schemas = {o.name: set(o.columns) for o in query.occurrences}
    anc = order.ancestors()
    out: dict[str, tuple[str, ...]] = {}

    def below(n: OrderNode | str) -> set[str]:
        if isinstance(n, str):
            return set(schemas[n])
        seen: set[str] = set()
        for c in n.children:
            seen |= below(c)
        out[n.var] = tuple(a for a in anc[n.var] if a in seen)
        return seen

    for r in order.roots:
        below(r)
    return out


def build_order(query: Query) -> VariableOrder:
    """The configured order, validated and completed, or the derived one."""
    if query.variable_order is None:
        return derive_order(query)
    return parse_order(query.variable_order, query)


def parse_order(spec: Mapping[str, Any], query: Query) -> VariableOrder:
    types = query.var_types
    seen: set[str] = set()

    def parse(var: Any, children: Any) -> OrderNode:
        if not isinstance(var, str) or var not in types:
            raise EngineError(f"variable_order names {var!r}, which is no relation's column")
        if var in seen:
            raise EngineError(f"variable_order names {var!r} twice")
        seen.add(var)
        if children is None:
            children = {}
        if not isinstance(children, Mapping):
            raise EngineError(f"variable_order: the children of {var!r} must be a mapping, got {children!r}")
        return OrderNode(var, [parse(v, c) for v, c in children.items()])

    roots: list[OrderNode | str] = [parse(v, c) for v, c in spec.items()]
    order = VariableOrder(roots, derived=False)
    anc = order.ancestors()
    free = set(query.free)
    for v in query.variables:
        if v in seen:
            continue
        owners = [o.name for o in query.occurrences if v in o.columns]
        if len(owners) > 1:
            raise EngineError(f"variable_order leaves out {v!r}, which joins {' and '.join(owners)}")
        if v in free:
            raise EngineError(f"variable_order leaves out the free variable {v!r}")
    for v in free:
        for a in anc[v]:
            if a not in free:
                raise EngineError(f"variable_order puts free variable {v!r} below bound variable {a!r}")
    by_var = {n.var: n for n in order.nodes()}
    for o in query.occurrences:
        placed = sorted((c for c in o.columns if c in seen), key=lambda c: len(anc[c]))
        for upper, lower in pairwise(placed):
            if upper not in anc[lower]:
                raise EngineError(
                    f"variable_order: the variables of {o.name} are not on one root-to-leaf path "
                    f"({upper!r} and {lower!r} are on different branches)"
                )
        chain = [OrderNode(c) for c in o.columns if c not in seen]
        for up, down in pairwise(chain):
            up.children.append(down)
        leaf_parent: OrderNode | None = chain[-1] if chain else (by_var[placed[-1]] if placed else None)
        if chain:
            if placed:
                by_var[placed[-1]].children.append(chain[0])
            else:
                roots.append(chain[0])
        if leaf_parent is None:
            roots.append(o.name)
        else:
            leaf_parent.children.append(o.name)
    return order


def derive_order(query: Query) -> VariableOrder:
    """The heuristic of §2.3: bound variables before free ones, each group in increasing number of
    relations containing the variable (ties: first appearance); each variable becomes the parent of
    every current subtree that contains it. Widely shared variables end up on top, free ones above
    bound ones, and each relation's variables on one path (every variable of R is made an ancestor of
    R's subtree when it is processed)."""
    free = set(query.free)
    variables = query.variables
    position = {v: i for i, v in enumerate(variables)}
    schemas = {o.name: set(o.columns) for o in query.occurrences}

    def rank(v: str) -> tuple[int, int, int]:
        return (v in free, query.occurrence_count(v), position[v])

    subtrees: list[tuple[OrderNode | str, set[str]]] = [(o.name, schemas[o.name]) for o in query.occurrences]
    for v in sorted(variables, key=rank):
        hit = [i for i, (_, vs) in enumerate(subtrees) if v in vs]
        node = OrderNode(v, [subtrees[i][0] for i in hit])
        covered: set[str] = set().union(*(subtrees[i][1] for i in hit))
        first = hit[0]
        keep = [t for i, t in enumerate(subtrees) if i not in hit[1:]]
        keep[first] = (node, covered)
        subtrees = keep
    return VariableOrder([t for t, _ in subtrees], derived=True)
