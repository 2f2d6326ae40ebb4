"""The classes tried before fivm besides nested aggregates: provenance statements (sketches), samples of
joins (reservoir) and 3-cycle counts (triangles)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from ivmstream.sql.analyze import AGGREGATES, Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import PYTHON_OPERATORS, ColumnRef, all_of, by_column, converted, position_of
from ivmstream.sql.joins import SERVICE_TYPE, join_classes, variables
from ivmstream.sql.model import Script
from ivmstream.sql.plan import Feed, Unit, ViewPlan

_CAST = {"int": int, "float": float, "str": str}


def _local_keep(shape: Shape, alias: str) -> Any:
    conds = shape.local.get(alias, [])
    return all_of([shape.compiler(by_column).compile(c) for c in conds]) if conds else None


# --- triangles --------------------------------------------------------------------------------------


def _cycle(shape: Shape) -> list[tuple[str, ColumnRef, ColumnRef]] | None:
    """(alias, first column, second column) around a 3-cycle of equi-joins, or None."""
    if len(shape.occurrences) != 3:
        return None
    classes = join_classes(shape)
    if len(classes) != 3 or any(len(c) != 2 or c[0][0] == c[1][0] for c in classes):
        return None
    cols: dict[str, list[ColumnRef]] = {}
    for c in classes:
        for ref in c:
            cols.setdefault(ref[0], []).append(ref)
    if any(len(v) != 2 or v[0][1] == v[1][1] for v in cols.values()) or len(cols) != 3:
        return None
    partner = {ref: (c[1] if c[0] == ref else c[0]) for c in classes for ref in c}
    first = shape.occurrences[0].alias
    a, b = cols[first]
    out = [(first, a, b)]
    while len(out) < 3:
        nxt = partner[out[-1][2]]
        other = next(r for r in cols[nxt[0]] if r != nxt)
        out.append((nxt[0], nxt, other))
    return out if partner[out[-1][2]] == out[0][1] else None


def plan_triangles(shape: Shape, script: Script) -> ViewPlan | None:
    """COUNT(*) over a 3-cycle of equi-joins (one edge relation three times, or three relations)."""
    if shape.nested or shape.group_by or shape.view.sample or len(shape.items) != 1:
        return None
    node = shape.items[0][1]
    if not isinstance(node, exp.Count) or shape.residual:
        return None
    cycle = _cycle(shape)
    if cycle is None:
        return None
    kinds = {SERVICE_TYPE[shape.column_type(r)] for _a, x, y in cycle for r in (x, y)}
    if len(kinds) != 1 or not kinds <= {"int", "str"}:
        return None
    id_type = kinds.pop()
    feeds = []
    for (alias, x, y), (rel, (ca, cb)) in zip(
        cycle, (("R", ("a", "b")), ("S", ("b", "c")), ("T", ("c", "a"))), strict=True
    ):
        table = shape.aliases[alias].name
        cast = _CAST[id_type]
        feeds.append(
            Feed(
                table,
                rel,
                [(ca, converted(by_column(x), cast)), (cb, converted(by_column(y), cast))],
                _local_keep(shape, alias),
            )
        )
    opts = {"mode": "relations", "strategy": "ivm-eps", "id_type": id_type}
    one_table = len({shape.aliases[a].name for a, _x, _y in cycle}) == 1
    plan = {
        "mode": "relations",
        "cycle": {rel: f"{alias}({x[1]}, {y[1]})" for (alias, x, y), rel in zip(cycle, "RST", strict=True)},
        "epsilon": "1/2",
        "heavy_light": "a value of a relation's join column is heavy when its degree is at least N^ε (N the "
        "database size), light otherwise; the partition is rebalanced as N doubles or halves",
        "views": "V_RS, V_ST, V_TR over heavy/light parts (IVM^ε)",
        "selections": {a: [c.sql() for c in cs] for a, cs in shape.local.items()},
    }
    why = (
        f"COUNT(*) over a 3-cycle of equi-joins "
        f"({'one edge relation three times' if one_table else 'three relations'}): "
        "IVM^ε's heavy/light partitioning beats F-IVM's view tree (O(N) per update on a cycle)"
    )
    cost = (
        "O(N^ε) = O(√N) amortized per single-tuple update at ε = 1/2 (worst-case optimal), "
        "O(1) to read the count"
    )
    return ViewPlan(
        shape.view,
        "triangles",
        "ivm-eps",
        why,
        plan,
        cost,
        [Unit("triangles", opts, feeds, "count")],
        [shape.items[0][0]],
        lambda results: [[results[0]["count"]]],
    )


# --- reservoir --------------------------------------------------------------------------------------


def _python(node: exp.Expression, shape: Shape, var_of: dict[ColumnRef, str]) -> str:
    """A residual predicate in the reservoir's predicate language (Python expressions over variables)."""
    if isinstance(node, exp.Paren):
        return "(" + _python(node.this, shape, var_of) + ")"
    if isinstance(node, exp.Column):
        return var_of[shape.resolve(node)[0]]
    if isinstance(node, exp.Literal):
        return repr(str(node.this)) if node.is_string else str(node.this)
    if isinstance(node, exp.Not):
        return "not (" + _python(node.this, shape, var_of) + ")"
    if isinstance(node, exp.Neg):
        return "-(" + _python(node.this, shape, var_of) + ")"
    op = PYTHON_OPERATORS.get(type(node))
    if op is None:
        raise SqlError(
            f"unsupported in a sampled join's predicate: {node.sql()!r}",
            position_of(shape.view.statement, node),
        )
    return f"({_python(node.this, shape, var_of)} {op} {_python(node.expression, shape, var_of)})"


def _self_join_aliases(shape: Shape, own: dict[str, list[tuple[ColumnRef, str]]]) -> dict[str, str]:
    """{alias: table} for the occurrences of a table read more than once whose occurrences read the same
    columns under the same selections: the reservoir stores such a table once and reads it through its
    aliases (one event per base row instead of one per occurrence)."""
    by_table: dict[str, list[str]] = {}
    for o in shape.occurrences:
        by_table.setdefault(o.table.name, []).append(o.alias)
    out: dict[str, str] = {}
    for table, aliases in by_table.items():
        if len(aliases) < 2 or table in {o.alias for o in shape.occurrences}:
            continue
        columns = {tuple(ref[1] for ref, _v in own[a]) for a in aliases}
        selections = {tuple(c.sql().replace(f"{a}.", "") for c in shape.local.get(a, [])) for a in aliases}
        if len(columns) == 1 and len(selections) == 1:
            out.update(dict.fromkeys(aliases, table))
    return out


def plan_reservoir(shape: Shape, script: Script) -> ViewPlan | None:
    """``SELECT cols FROM join WHERE ... USING SAMPLE reservoir(k ROWS)``: RSJoin."""
    if shape.view.sample is None:
        return None
    if shape.nested or any(n.find(*AGGREGATES) for _n, n in shape.items) or shape.group_by:
        raise SqlError(
            "unsupported: USING SAMPLE over aggregates or nested queries (sample a join's rows)",
            shape.view.where,
        )
    if not all(isinstance(n, exp.Column) for _n, n in shape.items):
        raise SqlError("unsupported: a sampled join outputs columns only", shape.view.where)
    outputs = [shape.resolve(n)[0] for _n, n in shape.items if isinstance(n, exp.Column)]
    residual_cols = [shape.resolve(c)[0] for r in shape.residual for c in r.find_all(exp.Column)]
    var_of, types = variables(shape, outputs + residual_cols)
    relations: dict[str, dict[str, str]] = {}
    feeds: list[Feed] = []
    own: dict[str, list[tuple[ColumnRef, str]]] = {}
    for ref, var in var_of.items():
        own.setdefault(ref[0], []).append((ref, var))
    for o in shape.occurrences:
        if not own.get(o.alias):
            raise SqlError(f"relation {o.alias} contributes no column to the sampled join", shape.view.where)
        own[o.alias].sort(key=lambda rv: list(o.table.columns).index(rv[0][1]))
        relations[o.alias] = {var: types[var] for _ref, var in own[o.alias]}
    opts: dict[str, Any] = {"relations": relations, "k": shape.view.sample}
    aliased = _self_join_aliases(shape, own)
    if aliased:
        opts["aliases"] = {alias: table for alias, table in aliased.items()}
        opts["base_columns"] = {t: [ref[1] for ref, _v in own[a]] for a, t in aliased.items()}
    for o in shape.occurrences:
        if o.alias in aliased:
            if any(f.relation == o.table.name for f in feeds):
                continue  # one feed per base table: the service fans it out to the aliases
            cols = [(ref[1], converted(by_column(ref), _CAST[types[var]])) for ref, var in own[o.alias]]
            feeds.append(Feed(o.table.name, o.table.name, cols, _local_keep(shape, o.alias)))
            continue
        getters = [(var, converted(by_column(ref), _CAST[types[var]])) for ref, var in own[o.alias]]
        feeds.append(Feed(o.table.name, o.alias, getters, _local_keep(shape, o.alias)))
    if shape.residual:
        opts["predicate"] = " and ".join(_python(r, shape, var_of) for r in shape.residual)
    names = [var_of[r] for r in outputs]

    def rows(results: Sequence[Any]) -> list[list[Any]]:
        return [[s[v] for v in names] for s in results[0]["sample"]]

    def fields(results: Sequence[Any]) -> dict[str, Any]:
        return {"sample": results[0]["sample"], "join_size": results[0].get("join_size")}

    plan = {
        "relations": relations,
        "k": shape.view.sample,
        "predicate": opts.get("predicate"),
        "selections": {a: [c.sql() for c in cs] for a, cs in shape.local.items()},
        "aliases": opts.get("aliases", {}),
    }
    why = (
        "a uniform sample of a join's result rows (USING SAMPLE reservoir): RSJoin keeps a reservoir over "
        "the "
        "join without materializing it; selections at intake, the cross-relation WHERE as its predicate"
    )
    cost = (
        "O(log N) amortized per insert (skips over the join without enumerating it); "
        "a delete in place, about an insert's work"
    )
    return ViewPlan(
        shape.view,
        "reservoir",
        "rsjoin",
        why,
        plan,
        cost,
        [Unit("reservoir", opts, feeds, "sample")],
        [n for n, _ in shape.items],
        rows,
        fields,
    )


# --- sketches ---------------------------------------------------------------------------------------


def plan_sketches(shape: Shape, script: Script) -> ViewPlan | None:
    """An IMP ``PROVENANCE ... OF (query)`` statement: the query answered over a provenance sketch."""
    prov = shape.view.provenance
    if prov is None:
        return None
    table = script.tables.get(prov["table"])
    if table is None or prov["column"] not in table.columns:
        raise SqlError(
            f"RANGESB names {prov['table']}.{prov['column']}, which is not declared", shape.view.where
        )
    read = {o.table.name for o in shape.occurrences}
    relations = {t: {c: SERVICE_TYPE[k] for c, k in script.tables[t].columns.items()} for t in sorted(read)}
    opts: dict[str, Any] = {
        "query": re.sub(r"DATE\('(\d{4}-\d{2}-\d{2})'\)", r"DATE '\1'", shape.view.select.sql()),
        "relations": relations,
        "partition": {prov["table"]: {"column": prov["column"], "boundaries": prov["boundaries"]}},
    }
    feeds = []
    for t in sorted(read):
        cols = [(c, converted(by_column(("", c)), _CAST[k])) for c, k in relations[t].items()]
        feeds.append(Feed(t, t, cols))
    why = (
        "an IMP provenance statement: the query is answered over a range-based provenance sketch "
        "maintained incrementally"
    )
    cost = "O(1) per update for a safe sketch (a fragment's count changes), plus the query's own maintenance"

    def rows(results: Sequence[Any]) -> list[list[Any]]:
        return [list(r.values()) if isinstance(r, dict) else list(r) for r in results[0].get("answer", [])]

    def fields(results: Sequence[Any]) -> dict[str, Any]:
        return {"sketch": results[0].get("sketch")}

    plan = {"partition": opts["partition"], "query": opts["query"]}
    return ViewPlan(
        shape.view,
        "sketches",
        "imp",
        why,
        plan,
        cost,
        [Unit("sketches", opts, feeds, "sketch")],
        [n for n, _ in shape.items],
        rows,
        fields,
    )
