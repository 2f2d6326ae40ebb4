"""A view's SELECT as the structure routing reads: relation occurrences, equi-joins, selections per
relation, residual and nested predicates, group-by columns and output items.

Columns are resolved here (an unknown table or column, or an ambiguous one, is an error at its
position), and constructs no class supports are refused by name before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import ColumnRef, Compiler, Getter, position_of
from ivmstream.sql.model import Script, Table, View

SUPPORTED = (
    "supported: SELECT over FROM lists or [NATURAL] INNER JOINs, WHERE with comparisons, BETWEEN, IN, LIKE, "
    "dates and correlated aggregate subqueries, GROUP BY, SUM/COUNT/AVG with CASE and arithmetic"
)
AGGREGATES = (exp.Sum, exp.Count, exp.Avg)


@dataclass
class Occurrence:
    alias: str
    table: Table


@dataclass
class Shape:
    """The analysed view."""

    view: View
    occurrences: list[Occurrence]
    equi: list[tuple[ColumnRef, ColumnRef]] = field(default_factory=list)
    local: dict[str, list[exp.Expression]] = field(default_factory=dict)
    residual: list[exp.Expression] = field(default_factory=list)
    nested: list[exp.Expression] = field(default_factory=list)
    group_by: list[ColumnRef] = field(default_factory=list)
    items: list[tuple[str, exp.Expression]] = field(default_factory=list)

    @property
    def aliases(self) -> dict[str, Table]:
        return {o.alias: o.table for o in self.occurrences}

    def compiler(self, getter: Getter) -> Compiler:
        return Compiler(self.view.statement, self.resolve, getter)

    def resolve(self, col: exp.Column) -> tuple[ColumnRef, str]:
        return resolve_column(self.view, self.aliases, col)

    def aliases_in(self, node: exp.Expression) -> set[str]:
        return {self.resolve(c)[0][0] for c in node.find_all(exp.Column)}

    def column_type(self, ref: ColumnRef) -> str:
        return self.aliases[ref[0]].columns[ref[1]]


def resolve_column(view: View, scope: dict[str, Table], col: exp.Column) -> tuple[ColumnRef, str]:
    """(alias, column) and type of a column in a scope; SqlError for unknown or ambiguous names."""
    name = col.name.lower()
    qualifier = col.table.lower() if col.table else None
    where = position_of(view.statement, col)
    if qualifier is not None:
        table = scope.get(qualifier)
        if table is None:
            raise SqlError(f"unknown table or alias {col.table!r} (in scope: {', '.join(scope)})", where)
        if name not in table.columns:
            raise SqlError(
                f"unknown column {name!r} of {table.name} (columns: {', '.join(table.columns)})", where
            )
        return (qualifier, name), table.columns[name]
    found = [a for a, t in scope.items() if name in t.columns]
    if not found:
        raise SqlError(f"unknown column {name!r} (in scope: {', '.join(scope)})", where)
    if len(found) > 1:
        raise SqlError(f"column {name!r} is ambiguous: it is in {', '.join(found)}", where)
    return (found[0], name), scope[found[0]].columns[name]


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.Where):
        node = node.this
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def disjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        return disjuncts(node.this) + disjuncts(node.expression)
    return [node]


def _same(a: exp.Expression, b: exp.Expression) -> bool:
    """The same condition, an equality in either operand order."""
    if isinstance(a, exp.EQ) and isinstance(b, exp.EQ):
        return {a.this.sql(), a.expression.sql()} == {b.this.sql(), b.expression.sql()}
    return a == b


def factor_disjunction(cond: exp.Expression) -> list[exp.Expression]:
    """``(C AND A) OR (C AND B)`` as ``C`` and ``A OR B``: the conjuncts every disjunct shares (TPC-H
    Q19's join condition) become conditions of their own; a disjunct left empty makes the OR true."""
    parts = disjuncts(cond)
    if len(parts) < 2 or cond.find(exp.Select) is not None:
        return [cond]
    terms = [conjuncts(p) for p in parts]
    common = [c for c in terms[0] if all(any(_same(c, d) for d in t) for t in terms[1:])]
    if not common:
        return [cond]
    rest = [[c for c in t if not any(_same(c, d) for d in common)] for t in terms]
    if any(not r for r in rest):
        return [c.copy() for c in common]
    ors = [exp.and_(*[c.copy() for c in r]) for r in rest]
    return [c.copy() for c in common] + [exp.Paren(this=exp.or_(*ors))]


def _refuse(view: View, node: exp.Expression, what: str) -> SqlError:
    return SqlError(f"unsupported: {what} ({SUPPORTED})", position_of(view.statement, node))


def refuse_unsupported(view: View, select: exp.Select) -> None:
    """Refuse, by name, every construct no class covers."""
    for node in select.walk():
        if isinstance(node, exp.Window):
            raise _refuse(view, node, "window functions")
        if isinstance(node, exp.With):
            raise _refuse(view, node, "recursive CTEs" if node.args.get("recursive") else "WITH clauses")
        if isinstance(node, exp.Exists):
            raise _refuse(view, node, "EXISTS")
        if isinstance(node, exp.Join) and (node.side or "").upper() in ("LEFT", "RIGHT", "FULL"):
            raise _refuse(view, node, f"{node.side.upper()} OUTER JOIN")
        if isinstance(node, exp.Union | exp.Intersect | exp.Except):
            raise _refuse(view, node, "set operations")
        if isinstance(node, exp.Select):
            for key, what in (
                ("order", "ORDER BY"),
                ("limit", "LIMIT"),
                ("having", "HAVING"),
                ("distinct", "DISTINCT"),
            ):
                if node.args.get(key) is not None:
                    raise _refuse(view, node.args[key], what)


def scope_of(view: View, script: Script, select: exp.Select) -> tuple[dict[str, Table], list[exp.Expression]]:
    """The aliases a SELECT's FROM binds and the join conditions its JOINs carry (as conjuncts)."""
    scope: dict[str, Table] = {}
    extra: list[exp.Expression] = []
    sources: list[tuple[exp.Expression, exp.Join | None]] = []
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise SqlError("a view needs a FROM clause", view.statement.position(0))
    sources.append((from_.this, None))
    sources.extend((j.this, j) for j in select.args.get("joins") or [])
    for src, join in sources:
        if isinstance(src, exp.Subquery):
            inner = src.this
            if not isinstance(inner, exp.Select):
                raise _refuse(view, src, "a derived table that is not a SELECT")
            alias = src.alias.lower()
            inner_scope, _ = scope_of(view, script, inner)
            cols: dict[str, str] = {}
            for item in inner.expressions:
                name = (item.alias or item.name).lower()
                cols[name] = "float" if item.find(*AGGREGATES) else _item_type(view, inner_scope, item)
            scope[alias] = Table(alias, cols, "stream", None, view.where)
            continue
        if not isinstance(src, exp.Table):
            raise _refuse(view, src, f"FROM item {src.sql()!r}")
        table = script.tables.get(src.name.lower())
        if table is None:
            raise SqlError(
                f"unknown table {src.name!r} (declared: {', '.join(script.tables) or 'none'})",
                position_of(view.statement, src),
            )
        alias = (src.alias or src.name).lower()
        if alias in scope:
            raise SqlError(f"alias {alias!r} is used twice in one FROM", position_of(view.statement, src))
        if (join is not None and join.args.get("kind") and str(join.args["kind"]).upper() == "NATURAL") or (
            join is not None and str(join.args.get("method") or "").upper() == "NATURAL"
        ):
            for other, t in scope.items():
                for c in t.columns:
                    if c in table.columns:
                        extra.append(
                            exp.EQ(this=exp.column(c, table=other), expression=exp.column(c, table=alias))
                        )
        scope[alias] = table
        if join is not None and join.args.get("on") is not None:
            extra.extend(conjuncts(join.args["on"]))
    return scope, extra


def _item_type(view: View, scope: dict[str, Table], item: exp.Expression) -> str:
    node = item.this if isinstance(item, exp.Alias) else item
    if isinstance(node, exp.Column):
        return resolve_column(view, scope, node)[1]
    return "float"


def _check_columns(view: View, script: Script, select: exp.Select, outer: dict[str, Table]) -> None:
    """Every column of a (sub)query resolves in its scope or an enclosing one."""
    scope, _ = scope_of(view, script, select)
    full = {**outer, **scope}
    for col in select.find_all(exp.Column):
        if col.find_ancestor(exp.Select) is not select:
            continue
        if not col.table and col.name.lower() not in {c for t in full.values() for c in t.columns}:
            aliases = {(e.alias or "").lower() for e in select.expressions}
            if col.name.lower() in aliases:
                continue
        resolve_column(view, full, col)
    for sub in select.find_all(exp.Select):
        if sub is not select and sub.parent_select is select:
            _check_columns(view, script, sub, full)


def analyze(view: View, script: Script) -> Shape:
    """The view's shape; SqlError for unknown names, type mismatches and unsupported constructs."""
    select = view.select
    refuse_unsupported(view, select)
    _check_columns(view, script, select, {})
    scope, extra = scope_of(view, script, select)
    shape = Shape(view, [Occurrence(a, t) for a, t in scope.items()])
    compiler = shape.compiler(lambda ref: lambda r: None)
    conditions: list[exp.Expression] = []
    for cond in conjuncts(select.args.get("where")) + extra:
        conditions.extend(factor_disjunction(cond))
    for cond in conditions:
        if cond.find(exp.Select) is not None:
            shape.nested.append(cond)
            continue
        compiler.check_condition(cond)
        used = shape.aliases_in(cond)
        if (
            isinstance(cond, exp.EQ)
            and isinstance(cond.this, exp.Column)
            and isinstance(cond.expression, exp.Column)
        ):
            a, b = shape.resolve(cond.this)[0], shape.resolve(cond.expression)[0]
            if a[0] != b[0]:
                shape.equi.append((a, b))
                continue
        if len(used) <= 1:
            shape.local.setdefault(next(iter(used), ""), []).append(cond)
        else:
            shape.residual.append(cond)
    group = select.args.get("group")
    for g in group.expressions if group is not None else []:
        if not isinstance(g, exp.Column):
            raise _refuse(view, g, f"GROUP BY expression {g.sql()!r} (group by columns)")
        shape.group_by.append(shape.resolve(g)[0])
    for position, item in enumerate(select.expressions, 1):
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(item, exp.Alias):
            name = item.alias.lower()
        else:
            name = item.name.lower() if isinstance(item, exp.Column) else f"column{position}"
        if isinstance(node, exp.Star):
            raise _refuse(view, node, "SELECT *")
        if node.find(*AGGREGATES) is None and node.find(exp.Select) is None:
            if not isinstance(node, exp.Column):
                raise _refuse(view, node, f"a non-aggregate output {node.sql()!r} that is not a column")
            ref = shape.resolve(node)[0]
            if ref not in shape.group_by and (select.args.get("group") is not None or node.find(*AGGREGATES)):
                raise SqlError(
                    f"column {node.sql()!r} is neither grouped nor aggregated",
                    position_of(view.statement, node),
                )
        shape.items.append((name, node))
    return shape
