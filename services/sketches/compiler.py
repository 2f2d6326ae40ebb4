"""The sketches SQL compiler: a query parsed into an annotated operator plan, its partition, safety.

The supported class (docs/sketches/algorithm.md §1.2): ``SELECT [DISTINCT] ... FROM`` tables with inner
joins (``JOIN ... ON`` or comma + WHERE), ``WHERE``, ``GROUP BY``, ``HAVING``, ``ORDER BY``, ``LIMIT``,
aggregates sum/count/avg/min/max, and ``UNION ALL`` of select-project-join queries. Anything else is a
``QueryError`` naming the construct. A ``(query, partition)`` pair is accepted only when a safety
condition S1-S4 (§5) proves the sketch safe to skip data with, or with ``allow_unsafe``.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from ivmstream.services.sketches import plan as P
from ivmstream.services.sketches.catalog import Table, parse_relations
from ivmstream.services.sketches.expressions import (
    AGGREGATES,
    Expr,
    QueryError,
    compile_expr,
    literal,
    unsupported,
)
from ivmstream.services.sketches.join_tree import (
    Scope,
    Source,
    UnionFind,
    check_tree,
    column_resolver,
    conjuncts,
    from_sources,
    join_tree,
)
from ivmstream.services.sketches.partition import RangeSpec, parse_partition
from ivmstream.services.sketches.reuse import reuse_refusal

STRATEGIES = ("imp", "full", "nosketch")


@dataclass
class Compiled:
    root: P.Node
    columns: list[str]
    ordered: bool  # the answer keeps the query's ORDER BY order (else rows are sorted)
    tables: dict[str, Table]  # the tables the query reads
    specs: list[RangeSpec]
    safety: str | None  # the condition that proved the sketch safe; None: maintained, never used
    nonnegative: dict[str, list[tuple[Expr, str]]] = field(default_factory=dict)  # S4's enforced inputs
    instances: list[tuple[str, Compiled]] = field(default_factory=list)  # answered with this sketch (§2.7.1)


@dataclass
class _SelectPlan:
    node: P.Node
    columns: list[str]
    ordered: bool
    kind: str  # spj, agg, distinct
    having: bool
    limit: bool
    group_columns: set[tuple[str, int]]  # (alias, position) of plain-column GROUP BY / DISTINCT items
    classes: UnionFind
    sources: list[Source]
    s4: dict[str, list[tuple[Expr, str]]] | None  # the sums' inputs to enforce >= 0 if S4 holds


def _output_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name
    return e.sql()


def _aggregate_calls(exprs: Sequence[exp.Expression]) -> list[exp.Expression]:
    calls: dict[str, exp.Expression] = {}
    for e in exprs:
        for node in e.walk():
            if type(node) in AGGREGATES:
                if any(type(x) in AGGREGATES for x in node.this.walk()) if node.this else False:
                    raise QueryError(f"nested aggregates are not supported: {node.sql()}")
                if isinstance(node.this, exp.Distinct):
                    raise QueryError(f"aggregates over DISTINCT are not supported: {node.sql()}")
                calls.setdefault(node.sql(), node)  # type: ignore[arg-type]
    return list(calls.values())


def _substitute_aliases(
    e: exp.Expression, aliases: Mapping[str, exp.Expression], scope: Scope
) -> exp.Expression:
    """Replace unqualified references to SELECT aliases (that are not table columns) by their expressions."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in aliases:
            try:
                scope.locate(node)
            except QueryError:
                return aliases[node.name.lower()].copy()
        return node

    return e.copy().transform(swap)


def _plan_select(
    select: exp.Select,
    tables: Mapping[str, Table],
    specs: Mapping[str, RangeSpec],
    pushdown: bool,
    bloom: bool,
    in_union: bool = False,
    probe: bool = False,
) -> _SelectPlan:
    for key in ("with_", "qualify", "connect", "pivots", "laterals"):
        if select.args.get(key):
            raise QueryError(f"{key.strip('_').upper()} is not supported")
    if select.args.get("distinct") and select.args["distinct"].args.get("on"):
        raise QueryError("DISTINCT ON is not supported")
    sources = from_sources(select, tables)
    node, placed, classes, scope = join_tree(select, sources, specs, pushdown, bloom, probe)
    items = list(select.expressions)
    if any(isinstance(i, exp.Star) for i in items):
        if len(items) != 1:
            raise QueryError("SELECT * cannot be mixed with other items")
        items = [exp.column(c, s.alias) for s in placed for c in s.table.sql_columns]
    for i in items:
        check_tree(i)
    names = [_output_name(i) for i in items]
    exprs = [i.this if isinstance(i, exp.Alias) else i for i in items]
    alias_map = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    group_by = list(select.args["group"].expressions) if select.args.get("group") else []
    having_e = select.args["having"].this if select.args.get("having") else None
    order = list(select.args["order"].expressions) if select.args.get("order") else []
    limit_e = select.args.get("limit")
    if select.args.get("offset"):
        raise QueryError("OFFSET is not supported")
    limit = None
    if limit_e is not None:
        lit = limit_e.expression
        if not isinstance(lit, exp.Literal) or lit.is_string or not isinstance(literal(lit), int):
            raise QueryError(f"LIMIT must be an integer constant: {limit_e.sql()}")
        limit = literal(lit)
        if limit < 0:
            raise QueryError("LIMIT must be >= 0")
    if in_union and (order or limit_e is not None):
        raise QueryError("ORDER BY / LIMIT inside UNION ALL branches are not supported")
    order_exprs: list[tuple[exp.Expression, bool]] = []
    for o in order:
        e, desc = o.this, bool(o.args.get("desc"))
        if isinstance(e, exp.Literal) and not e.is_string:
            idx = literal(e)
            if not isinstance(idx, int) or not 1 <= idx <= len(exprs):
                raise QueryError(f"ORDER BY position {e.sql()} is out of range")
            e = exprs[idx - 1]
        order_exprs.append((_substitute_aliases(e, alias_map, scope), desc))
    if having_e is not None:
        having_e = _substitute_aliases(having_e, alias_map, scope)
        check_tree(having_e)
    distinct = bool(select.args.get("distinct"))
    calls = _aggregate_calls(
        [*exprs, *([having_e] if having_e is not None else []), *(e for e, _ in order_exprs)]
    )
    base = column_resolver(scope)
    ordered = bool(order_exprs)
    if group_by or calls:
        if distinct:
            raise QueryError("SELECT DISTINCT together with GROUP BY / aggregates is not supported")
        return _plan_aggregate(
            node, scope, classes, placed, names, exprs, group_by, calls, having_e, order_exprs, limit
        )
    if having_e is not None:
        raise QueryError("HAVING needs GROUP BY or an aggregate")
    if distinct:
        node = P.Project(node, [compile_expr(e, base) for e in exprs])
        node = P.Aggregate(node, [operator.itemgetter(i) for i in range(len(exprs))], [])
        projected = {n.lower(): i for i, n in enumerate(names)}
        sqls = {e.sql(): i for i, e in enumerate(exprs)}

        def resolve_out(e: exp.Expression) -> int | None:
            if e.sql() in sqls:
                return sqls[e.sql()]
            if isinstance(e, exp.Column) and not e.table and e.name.lower() in projected:
                return projected[e.name.lower()]
            if isinstance(e, exp.Column):
                raise QueryError(f"ORDER BY {e.sql()} must be a selected column with SELECT DISTINCT")
            return None

        if ordered or limit is not None:
            node = P.TopK(node, [(compile_expr(e, resolve_out), d) for e, d in order_exprs], limit)
        groups = {scope.locate(e) for e in exprs if isinstance(e, exp.Column)}
        return _SelectPlan(
            node, names, ordered, "distinct", False, limit is not None, groups, classes, placed, None
        )
    if ordered or limit is not None:
        node = P.TopK(node, [(compile_expr(e, base), d) for e, d in order_exprs], limit)
    node = P.Project(node, [compile_expr(e, base) for e in exprs])
    return _SelectPlan(node, names, ordered, "spj", False, limit is not None, set(), classes, placed, None)


def _plan_aggregate(
    node: P.Node,
    scope: Scope,
    classes: UnionFind,
    placed: list[Source],
    names: list[str],
    exprs: list[exp.Expression],
    group_by: list[exp.Expression],
    calls: list[exp.Expression],
    having: exp.Expression | None,
    order: list[tuple[exp.Expression, bool]],
    limit: int | None,
) -> _SelectPlan:
    base = column_resolver(scope)
    for g in group_by:
        check_tree(g)
        if isinstance(g, exp.Literal):
            raise QueryError(f"GROUP BY by position or constant is not supported: {g.sql()}")
        if any(type(x) in AGGREGATES for x in g.walk()):
            raise QueryError(f"aggregates are not allowed in GROUP BY: {g.sql()}")
    group_cols = {scope.locate(g): i for i, g in enumerate(group_by) if isinstance(g, exp.Column)}
    group_sql = {g.sql(): i for i, g in enumerate(group_by)}
    call_pos = {c.sql(): len(group_by) + i for i, c in enumerate(calls)}
    aggs: list[tuple[str, Expr | None]] = []
    for c in calls:
        kind = AGGREGATES[type(c)]
        if kind == "count" and (c.this is None or isinstance(c.this, exp.Star)):
            aggs.append(("count_star", None))
        else:
            if kind != "count" and (c.this is None or isinstance(c.this, exp.Star)):
                raise QueryError(f"{c.sql()} needs an argument")
            aggs.append((kind, compile_expr(c.this, base)))

    def resolve(e: exp.Expression) -> int | None:
        if type(e) in AGGREGATES:
            return call_pos[e.sql()]
        if e.sql() in group_sql:
            return group_sql[e.sql()]
        if isinstance(e, exp.Column):
            where = scope.locate(e)
            if where in group_cols:
                return group_cols[where]
            raise QueryError(f"column {e.sql()} must appear in GROUP BY or be aggregated")
        return None

    node = P.Aggregate(node, [compile_expr(g, base) for g in group_by], aggs)
    if having is not None:
        node = P.Filter(node, compile_expr(having, resolve))
    if order or limit is not None:
        node = P.TopK(node, [(compile_expr(e, resolve), d) for e, d in order], limit)
    node = P.Project(node, [compile_expr(e, resolve) for e in exprs])
    s4 = _monotone_inputs(having, order, limit, calls, scope, placed)
    return _SelectPlan(
        node,
        names,
        bool(order),
        "agg",
        having is not None,
        limit is not None,
        set(group_cols),
        classes,
        placed,
        s4,
    )


def _monotone_inputs(
    having: exp.Expression | None,
    order: list[tuple[exp.Expression, bool]],
    limit: int | None,
    calls: list[exp.Expression],
    scope: Scope,
    placed: list[Source],
) -> dict[str, list[tuple[Expr, str]]] | None:
    """S4 (§5): HAVING of ``sum/count > c`` conjuncts and/or ``ORDER BY sum/count DESC LIMIT k``.

    Returns the sums' inputs (per table) whose values must be enforced >= 0, or None if S4 does not apply."""
    sums: list[exp.Expression] = []

    def monotone(a: exp.Expression) -> bool:
        if isinstance(a, exp.Count):
            return True
        if isinstance(a, exp.Sum):
            sums.append(a)
            return True
        return False

    for c in conjuncts(having):
        if (
            isinstance(c, exp.GT | exp.GTE)
            and type(c.this) in AGGREGATES
            and isinstance(c.expression, exp.Literal)
        ):
            ok = monotone(c.this)
        elif (
            isinstance(c, exp.LT | exp.LTE)
            and type(c.expression) in AGGREGATES
            and isinstance(c.this, exp.Literal)
        ):
            ok = monotone(c.expression)
        else:
            ok = False
        if not ok:
            return None
    if limit is not None and (
        not order or not order[0][1] or type(order[0][0]) not in AGGREGATES or not monotone(order[0][0])
    ):
        return None
    out: dict[str, list[tuple[Expr, str]]] = {}
    for s in sums:
        aliases = scope.aliases_of(s.this)
        if len(aliases) != 1:
            return None  # the input must be a per-row value of one table to be checked at ingestion
        alias = next(iter(aliases))
        src = scope.sources[alias]
        local = Scope([Source(alias, src.table)])
        out.setdefault(src.table.name, []).append(
            (compile_expr(s.this, column_resolver(local)), s.this.sql())
        )
    return out


def _safety(plan: _SelectPlan, specs: Sequence[RangeSpec], monotone_flag: bool) -> tuple[str | None, str]:
    """The safety condition (§5) proving ``Q(D_P) = Q(D)`` for this partition, or None and why not."""
    if not plan.having and not plan.limit:
        return "S1", ""
    if plan.kind == "spj":
        return "S3", ""
    partitioned = {s.table: s.position for s in specs}
    missing = []
    for src in plan.sources:
        if src.table.name not in partitioned:
            continue
        cls = plan.classes.find((src.alias, partitioned[src.table.name]))
        if not any(plan.classes.find(g) == cls for g in plan.group_columns):
            missing.append(f"{src.alias}.{src.table.sql_columns[partitioned[src.table.name]]}")
    if not missing:
        return "S2", ""
    if plan.s4 is not None and monotone_flag:
        return "S4", ""
    what = "HAVING" if plan.having else "LIMIT"
    why = (
        f"the query filters groups ({what}) and the partition attribute {', '.join(missing)} is neither a "
        "GROUP BY column nor equated to one, so a partial group could change the answer (S2)"
    )
    if plan.s4 is not None:
        why += "; S4 applies with monotone_aggregates: true (sums then refuse negative inputs)"
    return None, why


def compile_query(
    sql: str,
    relations: Any = "tpch",
    partition: Mapping[str, Any] | None = None,
    *,
    selection_pushdown: bool = True,
    bloom: bool = False,
    allow_unsafe: bool = False,
    monotone_aggregates: bool = False,
    top_m: int | None = None,
    join: str = "mat",
) -> Compiled:
    """Parse and plan ``sql``; QueryError (a ValueError) for anything outside the class or unsafe."""
    tables = parse_relations(relations)
    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.ParseError as exc:
        raise QueryError(f"cannot parse the query: {str(exc).splitlines()[0]}") from None
    if tree.args.get("with_"):
        raise QueryError("WITH (common table expressions) is not supported")
    read = {t.name.lower() for t in tree.find_all(exp.Table)}
    unknown = sorted(read - set(tables))
    if unknown:
        raise QueryError(f"unknown table {unknown[0]!r} (known: {', '.join(sorted(tables))})")
    specs = parse_partition(partition or {}, tables, read)
    by_table = {s.table: s for s in specs}
    if isinstance(tree, exp.Union):
        branches = _union_branches(tree)
        plans = [
            _plan_select(b, tables, by_table, selection_pushdown, bloom, in_union=True, probe=join == "probe")
            for b in branches
        ]
        widths = {len(p.columns) for p in plans}
        if len(widths) != 1:
            raise QueryError("UNION ALL branches select different numbers of columns")
        if any(p.kind != "spj" for p in plans):
            raise QueryError("UNION ALL is supported over select-project-join branches only")
        root: P.Node = P.Union([p.node for p in plans])
        columns, ordered = plans[0].columns, False
        safety: str | None = "S1"
        s4: dict[str, list[tuple[Expr, str]]] = {}
    elif isinstance(tree, exp.Select):
        one = _plan_select(tree, tables, by_table, selection_pushdown, bloom, probe=join == "probe")
        root, columns, ordered = one.node, one.columns, one.ordered
        safety, why = _safety(one, specs, monotone_aggregates)
        if safety is None and not allow_unsafe:
            raise QueryError(
                f"the sketch is not provably safe: {why} (allow_unsafe: true maintains it unused)"
            )
        s4 = one.s4 if safety == "S4" and one.s4 else {}
    else:
        if isinstance(tree, exp.Except | exp.Intersect):
            raise QueryError(f"{tree.key.upper()} is not supported (only UNION ALL)")
        raise QueryError(f"not a query: {sql!r}")
    for node in root.walk():
        node.set_top_m(top_m)
    used = {t.name for t in tables.values() if t.name in read}
    return Compiled(root, columns, ordered, {n: tables[n] for n in sorted(used)}, specs, safety, s4)


def _union_branches(tree: exp.Expression) -> list[exp.Select]:
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct"):
            raise QueryError("UNION (without ALL) is not supported; write UNION ALL")
        for key in ("order", "limit"):
            if tree.args.get(key):
                raise QueryError("ORDER BY / LIMIT over UNION ALL is not supported")
        return _union_branches(tree.this) + _union_branches(tree.expression)
    if isinstance(tree, exp.Select):
        return [tree]
    if isinstance(tree, exp.Except | exp.Intersect):
        raise QueryError(f"{tree.key.upper()} is not supported (only UNION ALL)")
    raise unsupported(tree)


def compile_options(options: Mapping[str, Any]) -> Compiled:
    if options["query"] is None:
        raise ValueError("'query' is required: the SQL query to sketch")
    compiled = _compile_one(options, options["query"])
    for sql in options["instances"]:
        why = reuse_refusal(options["query"], sql, compiled.safety)
        if why is not None:
            raise QueryError(f"instance {sql!r} cannot reuse the sketch: {why}")
        compiled.instances.append((sql, _compile_one(options, sql)))
    return compiled


def _compile_one(options: Mapping[str, Any], sql: str) -> Compiled:
    return compile_query(
        sql,
        options["relations"],
        options["partition"],
        selection_pushdown=options["selection_pushdown"],
        bloom=options["bloom"],
        allow_unsafe=options["allow_unsafe"],
        monotone_aggregates=options["monotone_aggregates"],
        top_m=options["top_m"] or None,  # 0: keep every value
        join=options["join"],
    )
