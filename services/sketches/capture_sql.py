"""Provenance capture as SQL (docs/sketches/algorithm.md §8.1): the query rewritten to return the
fragment ids of the rows in its provenance, for an engine outside this service (Spark for reconcile,
DuckDB for the vectorised ``full`` baseline of the benchmark).

The rewrite reads ``__p_<table>`` views: the table plus a ``__frag`` column holding each row's global
fragment id (``fragment_sql``; -1 for an unpartitioned table). Without HAVING or LIMIT every row passing
the joins and WHERE is provenance; with them, the result's groups (or DISTINCT rows, or top-k rows) are
computed under the engine's total order and joined back to their input rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from ivmstream.services.sketches.partition import RangeSpec

FRAG = "__frag"


def dates_as_text(tree: exp.Expression) -> exp.Expression:
    """``DATE 'yyyy-mm-dd'`` as the text literal: the engine compares dates as ISO text (§1.2), and the
    tables hold them as text; ``EXTRACT(YEAR FROM d)`` accordingly as the number of the text's first
    four characters."""

    def plain(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Extract) and node.this.name.upper() == "YEAR":
            head = exp.Substring(this=node.expression.copy(), start=exp.Literal.number(1))
            head.set("length", exp.Literal.number(4))
            return exp.Cast(this=head, to=exp.DataType.build("INT"))
        if (
            isinstance(node, exp.Cast)
            and isinstance(node.this, exp.Literal)
            and node.this.is_string
            and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
        ):
            return node.this.copy()
        return node

    return tree.copy().transform(plain)


def _columns(t: exp.Table, columns: Mapping[str, Sequence[str]]) -> Sequence[str]:
    return columns[t.name.lower().removeprefix("__p_")]


def _same(e: exp.Expression, column: str, dialect: str) -> str:
    """``e`` equals ``column``, NULL equal to NULL (as grouping treats it)."""
    return exp.NullSafeEQ(this=exp.Paren(this=e.copy()), expression=sqlglot.parse_one(column)).sql(
        dialect=dialect
    )


def fragment_sql(column: str, spec: RangeSpec) -> str:
    """The global fragment id of ``column`` as a balanced CASE tree (NULL: fragment 0, as the engine)."""

    def tree(lo: int, hi: int) -> str:  # fragments lo..hi, boundaries lo+1..hi separate them
        if lo == hi:
            return str(spec.offset + lo)
        mid = (lo + hi + 1) // 2
        b = spec.boundaries[mid - 1]
        lit = f"'{b}'" if isinstance(b, str) else repr(b)
        return f"CASE WHEN {column} < {lit} THEN {tree(lo, mid - 1)} ELSE {tree(mid, hi)} END"

    return f"CASE WHEN {column} IS NULL THEN {spec.offset} ELSE {tree(0, len(spec.boundaries))} END"


def _tables(select: exp.Select) -> list[exp.Table]:
    items = [select.args["from_"].this, *(j.this for j in select.args.get("joins") or [])]
    return [t for t in items if isinstance(t, exp.Table)]


def _with_provenance_tables(select: exp.Select) -> tuple[exp.Select, list[str]]:
    """The select reading ``__p_<t>`` views (aliased as before); the fragment columns of its aliases."""
    out = select.copy()
    frags = []
    for t in _tables(out):
        alias = t.alias or t.name
        frags.append(f"{alias}.{FRAG}")
        t.set("this", exp.to_identifier(f"__p_{t.name.lower()}"))
        t.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return out, frags


def _core(select: exp.Select, items: list[str], dialect: str) -> exp.Select:
    """``SELECT items FROM <the query's tables> WHERE <its predicates>`` (no grouping, order, limit)."""
    core = select.copy()
    for key in ("group", "having", "order", "limit", "distinct"):
        core.set(key, None)
    core.set("expressions", [sqlglot.parse_one(i, read=dialect) for i in items])
    return core


def _nulls_last(order: exp.Order | None) -> list[exp.Ordered]:
    out = []
    for o in order.expressions if order else []:
        o = o.copy()
        o.set("nulls_first", False)
        out.append(o)
    return out


def answer_sql(sql: str, columns: Mapping[str, Sequence[str]], dialect: str) -> str:
    """The query in ``dialect``, with the engine's total order (§2.9) spelled out: NULLS LAST on its own
    keys, then ties broken by the group values (aggregates), the selected values (DISTINCT) or every
    column (select-project-join)."""
    tree = dates_as_text(sqlglot.parse_one(sql))  # type: ignore[arg-type]
    if not isinstance(tree, exp.Select) or not (tree.args.get("order") or tree.args.get("limit")):
        return tree.sql(dialect=dialect)
    select = tree.copy()
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    aggregated = bool(group) or any(True for _ in select.find_all(exp.AggFunc))
    if aggregated:
        ties = [g.copy() for g in group]
    elif select.args.get("distinct"):
        ties = [(e.this if isinstance(e, exp.Alias) else e).copy() for e in select.expressions]
    else:
        ties = [
            sqlglot.parse_one(f"{t.alias or t.name}.{c}")
            for t in _tables(select)
            for c in columns[t.name.lower().removeprefix("__p_")]
        ]
    order = [*_nulls_last(select.args.get("order")), *(exp.Ordered(this=t, nulls_first=True) for t in ties)]
    select.set("order", exp.Order(expressions=order))
    return select.sql(dialect=dialect)


def capture_sql(select: exp.Select, columns: Mapping[str, Sequence[str]], dialect: str) -> str:
    """A query (in ``dialect``) whose rows are the fragment ids of the query's provenance (§8.1)."""
    select, frags = _with_provenance_tables(dates_as_text(select))  # type: ignore[arg-type]
    frag_items = [f"{f} AS __f{i}" for i, f in enumerate(frags)]
    group = list(select.args["group"].expressions) if select.args.get("group") else []
    aggregated = bool(group) or any(isinstance(x, exp.AggFunc) for x in select.find_all(exp.AggFunc))
    having, limit = select.args.get("having"), select.args.get("limit")
    if having is None and limit is None:
        return _core(select, frag_items, dialect).sql(dialect=dialect)  # every row is provenance
    if aggregated:  # the result's groups, joined back to their input rows
        result = select.copy()
        extra = [exp.alias_(g.copy(), f"__g{i}") for i, g in enumerate(group)]
        result.set("expressions", [*result.expressions, *extra])
        ties = [exp.Ordered(this=exp.column(f"__g{i}"), nulls_first=True) for i in range(len(group))]
        if select.args.get("order") or limit is not None:
            result.set("order", exp.Order(expressions=[*_nulls_last(select.args.get("order")), *ties]))
        core = _core(select, frag_items, dialect)
        on = [_same(g, f"__res.__g{i}", dialect) for i, g in enumerate(group)]
        keys = ", ".join(f"__g{i}" for i in range(len(group))) or "1 AS __one"
        groups = f"SELECT {keys} FROM ({result.sql(dialect=dialect)}) AS __r"  # only the keys are visible
        core = core.join(f"({groups}) AS __res", join_type="cross", dialect=dialect)
        if on:
            core = core.where(" AND ".join(on), dialect=dialect)
        return core.sql(dialect=dialect)
    items = list(select.expressions)
    if select.args.get("distinct"):  # DISTINCT ... ORDER BY ... LIMIT k: its rows, joined back
        result = select.copy()
        result.set("expressions", [exp.alias_(e.copy(), f"__d{i}") for i, e in enumerate(items)])
        names = {(e.alias or e.sql()).lower(): i for i, e in enumerate(items)}
        order = []
        for o in _nulls_last(select.args.get("order")):
            ref = o.this.sql().lower()
            if ref in names:
                o.set("this", exp.column(f"__d{names[ref]}"))
            order.append(o)
        ties = [exp.Ordered(this=exp.column(f"__d{i}"), nulls_first=True) for i in range(len(items))]
        result.set("order", exp.Order(expressions=[*order, *ties]))
        core = _core(select, frag_items, dialect)
        on = [
            _same(e.this if isinstance(e, exp.Alias) else e, f"__res.__d{i}", dialect)
            for i, e in enumerate(items)
        ]
        core = core.join(f"({result.sql(dialect=dialect)}) AS __res", join_type="cross", dialect=dialect)
        return core.where(" AND ".join(on), dialect=dialect).sql(dialect=dialect)
    # top-k over select-project-join: the first k joined rows under the ORDER BY, ties by every column
    cols = [
        f"{t.alias or t.name}.{c}"
        for t in _tables(select)
        for c in columns[t.name.lower().removeprefix("__p_")]
    ]
    top = _core(select, [*frag_items, *cols], dialect)
    ties = [exp.Ordered(this=sqlglot.parse_one(c, read=dialect), nulls_first=True) for c in cols]
    top.set("order", exp.Order(expressions=[*_nulls_last(select.args.get("order")), *ties]))
    top.set("limit", limit.copy() if limit is not None else None)
    return f"SELECT {', '.join(f'__f{i}' for i in range(len(frags)))} FROM ({top.sql(dialect=dialect)})"


def branches(tree: exp.Expression) -> list[exp.Select]:
    """The SELECT blocks of a query (one, or the branches of UNION ALL)."""
    if isinstance(tree, exp.Union):
        return branches(tree.this) + branches(tree.expression)
    assert isinstance(tree, exp.Select)
    return [tree]
