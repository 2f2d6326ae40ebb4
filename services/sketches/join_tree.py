"""The FROM and WHERE clauses of a sketches query as a join tree: its tables by alias (``Scope``), its
conditions split into equi-joins, pushed-down selections and theta conditions, and the tables joined
one by one along the equi-join edges (``join_tree``), each join an equi-join on key positions
(``ivmstream.services.sketches.compiler`` plans the rest of the query on it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.catalog import Table
from ivmstream.services.sketches.expressions import AGGREGATES, Expr, QueryError, compile_expr, unsupported
from ivmstream.services.sketches.partition import RangeSpec
from ivmstream.services.sketches.probe import ProbeJoin


@dataclass
class Source:
    alias: str
    table: Table
    base: int = 0  # position of its first column in the joined row


class Scope:
    """Columns of the FROM clause's tables by alias, and their positions in the joined row."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self.sources = {s.alias: s for s in sources}

    def locate(self, col: exp.Column) -> tuple[str, int]:
        """(alias, column position within its table) of a column reference."""
        name, qual = col.name.lower(), col.table.lower()
        hits = []
        for alias, src in self.sources.items():
            if qual and qual != alias:
                continue
            pos = src.table.position(name)
            if pos is not None:
                hits.append((alias, pos))
        if not hits:
            raise QueryError(f"unknown column {col.sql()}")
        if len(hits) > 1:
            raise QueryError(f"ambiguous column {col.sql()}: qualify it with its table")
        return hits[0]

    def aliases_of(self, e: exp.Expression) -> set[str]:
        return {self.locate(c)[0] for c in e.find_all(exp.Column)}


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        inner = conjuncts(e.this)
        return inner if len(inner) > 1 else [e]
    return [e]


def check_tree(e: exp.Expression) -> None:
    for node in e.walk():
        if isinstance(node, exp.Subquery | exp.Exists | exp.Window):
            raise unsupported(node)
        if isinstance(node, exp.Select) and node is not e:
            raise unsupported(node)
        if isinstance(node, exp.AggFunc) and type(node) not in AGGREGATES:
            raise QueryError(f"unsupported aggregate {node.sql()} (supported: sum, count, avg, min, max)")


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def union(self, a: Any, b: Any) -> None:
        self.parent[self.find(a)] = self.find(b)


def from_sources(select: exp.Select, tables: Mapping[str, Table]) -> list[Source]:
    froms = select.args.get("from_")
    if froms is None:
        raise QueryError("the query must read a table (FROM)")
    items = [froms.this]
    for j in select.args.get("joins") or []:
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side or kind not in ("", "INNER", "CROSS"):
            raise QueryError(f"outer and semi joins are not supported: {j.sql()}")
        if j.args.get("using"):
            raise QueryError(f"JOIN ... USING is not supported (write ON): {j.sql()}")
        items.append(j.this)
    out: list[Source] = []
    for item in items:
        if not isinstance(item, exp.Table):
            raise (
                unsupported(item)
                if isinstance(item, exp.Subquery)
                else QueryError(f"cannot read {item.sql()}")
            )
        name = item.name.lower()
        if name not in tables:
            raise QueryError(f"unknown table {item.name!r} (known: {', '.join(sorted(tables))})")
        alias = (item.alias or item.name).lower()
        if any(s.alias == alias for s in out):
            raise QueryError(f"table alias {alias!r} is used twice")
        out.append(Source(alias, tables[name]))
    return out


def join_tree(
    select: exp.Select,
    sources: list[Source],
    specs: Mapping[str, RangeSpec],
    pushdown: bool,
    bloom: bool,
    probe: bool,
) -> tuple[P.Node, list[Source], UnionFind, Scope]:
    scope = Scope(sources)
    conds = conjuncts(select.args["where"].this if select.args.get("where") else None)
    for j in select.args.get("joins") or []:
        conds += conjuncts(j.args.get("on"))
    classes = UnionFind()
    equi: list[tuple[str, int, str, int]] = []
    single: dict[str, list[exp.Expression]] = {s.alias: [] for s in sources}
    rest: list[tuple[set[str], exp.Expression]] = []
    for c in conds:
        check_tree(c)
        aliases = scope.aliases_of(c)
        if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
            (a1, p1), (a2, p2) = scope.locate(c.this), scope.locate(c.expression)
            classes.union((a1, p1), (a2, p2))
            if a1 != a2:
                equi.append((a1, p1, a2, p2))
                continue
        if len(aliases) == 1 and pushdown:
            single[next(iter(aliases))].append(c)  # selection push-down below the joins (§2.6.1)
        else:
            rest.append((aliases, c))

    def leaf(src: Source) -> P.Node:
        node: P.Node = P.Scan(src.table.name, specs.get(src.table.name), len(src.table.sql_columns))
        local = Scope([Source(src.alias, src.table)])
        for c in single[src.alias]:
            node = P.Filter(node, compile_expr(c, column_resolver(local)))
        return node

    placed = [sources[0]]
    sources[0].base = 0
    node = leaf(sources[0])
    width = len(sources[0].table.sql_columns)
    remaining = sources[1:]
    while remaining:
        inside = {s.alias for s in placed}
        nxt = next((s for s in remaining if any(_edge(e, inside, s.alias) for e in equi)), remaining[0])
        remaining.remove(nxt)
        lpos, rpos = [], []
        for a1, p1, a2, p2 in equi:
            if a1 in inside and a2 == nxt.alias:
                lpos.append(next(s for s in placed if s.alias == a1).base + p1)
                rpos.append(p2)
            elif a2 in inside and a1 == nxt.alias:
                lpos.append(next(s for s in placed if s.alias == a2).base + p2)
                rpos.append(p1)
        nxt.base = width
        placed.append(nxt)
        width += len(nxt.table.sql_columns)
        inside.add(nxt.alias)
        joined_scope = Scope(placed)
        theta_parts = [c for aliases, c in rest if aliases <= inside and aliases & {nxt.alias}]
        rest = [(a, c) for a, c in rest if not (a <= inside and a & {nxt.alias})]
        theta = conjunction(theta_parts, column_resolver(joined_scope))
        if probe:
            node = ProbeJoin(node, leaf(nxt), (tuple(lpos), tuple(rpos)), theta, bloom)
        else:
            node = P.Join(node, leaf(nxt), _key(lpos), _key(rpos), theta, bloom)
    scope = Scope(placed)
    top = conjunction([c for _, c in rest], column_resolver(scope))
    if top is not None:
        node = P.Filter(node, top)
    return node, placed, classes, scope


def _edge(e: tuple[str, int, str, int], inside: set[str], alias: str) -> bool:
    return (e[0] in inside and e[2] == alias) or (e[2] in inside and e[0] == alias)


def _key(positions: list[int]) -> Expr:
    if not positions:
        return lambda _row: ()
    getter = operator.itemgetter(*positions)
    if len(positions) == 1:
        return lambda row: (getter(row),)
    return getter  # type: ignore[return-value]


def conjunction(parts: list[exp.Expression], resolve: Callable[[exp.Expression], int | None]) -> Expr | None:
    if not parts:
        return None
    fns = [compile_expr(c, resolve) for c in parts]
    if len(fns) == 1:
        return fns[0]

    def all_true(row: P.Row) -> Any:
        out: Any = True
        for f in fns:
            v = f(row)
            if v is False:
                return False
            if v is None:
                out = None
        return out

    return all_true


def column_resolver(scope: Scope) -> Callable[[exp.Expression], int | None]:
    def resolve(e: exp.Expression) -> int | None:
        if isinstance(e, exp.Column):
            alias, pos = scope.locate(e)
            return scope.sources[alias].base + pos
        return None

    return resolve
