"""SUM/COUNT/AVG over a join with a predicate across relations that no other class covers (DBToaster's
axfinder and brokerspread): the firstorder service, first-order IVM (docs/sql.md "Classes").

Equi-joined columns become one join variable (the service joins by shared names); every other column
the predicate, the group-by or an aggregate reads becomes a variable of its occurrence. Selections on
one relation are applied at intake; the rest of the WHERE becomes the service's predicate and each
aggregate argument one of its summed expressions, both in its expression language (Python syntax).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from ivmstream.sql.aggregates import evaluate_output
from ivmstream.sql.analyze import AGGREGATES, Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import (
    PYTHON_OPERATORS,
    ColumnRef,
    _date_text,
    all_of,
    by_column,
    converted,
    position_of,
)
from ivmstream.sql.joins import variables
from ivmstream.sql.plan import Feed, Unit, ViewPlan

_CAST = {"int": int, "float": float, "str": str}
COST = (
    "O(size of the other relations) per single-tuple update: the delta query is evaluated against the "
    "other relations' current contents, through hash indexes on the equi-join variables (O(tuples "
    "matching the update's join key) when the join is selective); O(groups) to read the result"
)


class _Python:
    """SQL scalar expressions in the service's expression language, columns named by their variables."""

    def __init__(self, shape: Shape, var_of: dict[ColumnRef, str]) -> None:
        self.shape = shape
        self.var_of = var_of

    def fail(self, node: exp.Expression) -> SqlError:
        return SqlError(
            f"unsupported in a first-order view's predicate or aggregate: {node.sql()!r} (supported: "
            "arithmetic, comparisons, BETWEEN, IN lists, AND/OR/NOT, CASE, LISTMAX/LISTMIN, dates)",
            position_of(self.shape.view.statement, node),
        )

    def __call__(self, node: exp.Expression) -> str:
        date = _date_text(node)
        if date is not None:
            return repr(date)
        if isinstance(node, exp.Paren):
            return self(node.this)  # every operator below is parenthesized
        if isinstance(node, exp.Column):
            return self.var_of[self.shape.resolve(node)[0]]
        if isinstance(node, exp.Literal):
            return repr(str(node.this)) if node.is_string else repr(_number(str(node.this)))
        if isinstance(node, exp.Boolean):
            return "1" if node.this else "0"
        if isinstance(node, exp.Not):
            return f"(not {self(node.this)})"
        if isinstance(node, exp.Neg):
            return f"(-{self(node.this)})"
        if isinstance(node, exp.Between):
            return f"({self(node.args['low'])} <= {self(node.this)} <= {self(node.args['high'])})"
        if isinstance(node, exp.In) and node.expressions:
            values = ", ".join(self(e) for e in node.expressions)
            return f"({self(node.this)} in ({values},))"
        if isinstance(node, exp.Case):
            out = self(node.args["default"]) if node.args.get("default") is not None else "None"
            for branch in reversed(node.args.get("ifs") or []):
                out = f"({self(branch.args['true'])} if {self(branch.this)} else {out})"
            return out
        if isinstance(node, exp.Greatest | exp.Least):
            args = ", ".join(self(a) for a in [node.this, *node.expressions])
            return f"{'min' if isinstance(node, exp.Least) else 'max'}({args})"
        if isinstance(node, exp.Anonymous) and str(node.this).upper() in ("LISTMAX", "LISTMIN"):
            args = ", ".join(self(a) for a in node.expressions)
            return f"{'min' if str(node.this).upper() == 'LISTMIN' else 'max'}({args})"
        op = PYTHON_OPERATORS.get(type(node))
        if op is None:
            raise self.fail(node)
        return f"({self(node.this)} {op} {self(node.expression)})"


def _number(text: str) -> int | float:
    return int(text) if text.isdigit() else float(text)


def _columns(node: exp.Expression, shape: Shape) -> list[ColumnRef]:
    return [shape.resolve(c)[0] for c in node.find_all(exp.Column)]


def plan_firstorder(shape: Shape, ruled_out: str) -> ViewPlan:
    """The firstorder unit of a view with a residual predicate; ``ruled_out`` says why fivm cannot."""
    view = shape.view
    calls = [agg for _n, node in shape.items for agg in node.find_all(*AGGREGATES)]
    if not calls:
        raise SqlError(
            "unsupported: a view without aggregates over a join with a residual predicate "
            "(a sample of a join needs USING SAMPLE reservoir(k ROWS))",
            view.where,
        )
    for agg in calls:
        if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct):
            raise SqlError("unsupported: COUNT(DISTINCT ...)", position_of(view.statement, agg))
    refs = list(shape.group_by)
    for node in shape.residual:
        refs.extend(_columns(node, shape))
    for agg in calls:
        if not isinstance(agg, exp.Count):
            refs.extend(_columns(agg.this, shape))
    order = [o.alias for o in shape.occurrences]
    var_of, types = variables(shape, sorted(refs, key=lambda r: order.index(r[0])))
    python = _Python(shape, var_of)
    relations: dict[str, dict[str, str]] = {}
    feeds: list[Feed] = []
    for o in shape.occurrences:
        own = sorted(
            ((ref, var) for ref, var in var_of.items() if ref[0] == o.alias),
            key=lambda rv: list(o.table.columns).index(rv[0][1]),
        )
        if not own:
            raise SqlError(
                f"relation {o.alias} contributes no column to the join (a cross product of a relation "
                "read for its count alone)",
                view.where,
            )
        relations[o.alias] = {var: types[var] for _ref, var in own}
        conds = shape.local.get(o.alias, [])
        keep = all_of([shape.compiler(by_column).compile(c) for c in conds]) if conds else None
        getters = [(var, converted(by_column(ref), _CAST[types[var]])) for ref, var in own]
        feeds.append(Feed(o.table.name, o.alias, getters, keep))
    sums: dict[int, str] = {}
    for agg in calls:
        if not isinstance(agg, exp.Count) and id(agg) not in sums:
            sums[id(agg)] = f"a{len(sums) + 1}"
    aggregates = {name: python(next(a.this for a in calls if id(a) == key)) for key, name in sums.items()}
    free = [var_of[r] for r in shape.group_by]
    options: dict[str, Any] = {"relations": relations, "aggregates": aggregates, "free": free or None}
    if shape.residual:
        options["predicate"] = " and ".join(python(r) for r in shape.residual)
    columns = {id(n): var_of[shape.resolve(n)[0]] for _name, n in shape.items if isinstance(n, exp.Column)}

    def rows(results: Sequence[Any]) -> list[list[Any]]:
        groups = results[0]["groups"]
        if not groups and not free:
            groups = [{"key": {}, "count": 0, "sums": dict.fromkeys(aggregates, 0.0)}]
        out = []
        for g in groups:
            values: dict[int, Any] = {}
            for agg in calls:
                if isinstance(agg, exp.Count):
                    values[id(agg)] = g["count"]
                elif isinstance(agg, exp.Avg):
                    total = float(g["sums"][sums[id(agg)]])  # DBToaster's AVG: SUM · 1/max(1, COUNT)
                    values[id(agg)] = total / g["count"] if g["count"] else 0.0
                else:
                    values[id(agg)] = float(g["sums"][sums[id(agg)]])
            cols = {nid: g["key"][var] for nid, var in columns.items()}
            out.append([evaluate_output(node, values, cols) for _n, node in shape.items])
        return out

    plan = {
        "relations": relations,
        "predicate": options.get("predicate"),
        "free": free,
        "aggregates": {name: f"SUM({text})" for name, text in aggregates.items()} | {"count": "COUNT(*)"},
        "selections": {a: [c.sql() for c in cs] for a, cs in shape.local.items()},
        "delta_queries": delta_queries(relations),
    }
    why = (
        f"SUM/COUNT/AVG over a join with a predicate across relations that no view tree factorizes "
        f"({ruled_out}): first-order IVM evaluates each update's delta query against the other relations "
        "and adds it to the materialised aggregates; no nested aggregate (vwap), no 3-cycle count "
        "(triangles), no sample (reservoir), no provenance clause (sketches)"
    )
    return ViewPlan(
        view,
        "firstorder",
        "first-order",
        why,
        plan,
        COST,
        [Unit("firstorder", options, feeds, "count, " + ", ".join(aggregates) if aggregates else "count")],
        [name for name, _n in shape.items],
        rows,
    )


def delta_queries(relations: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Per updated relation, the others in the order its delta query probes them and how (the
    service's greedy order: most variables already bound first, a lookup on them, else a scan)."""
    out = {}
    for updated, cols in relations.items():
        bound = set(cols)
        rest = [r for r in relations if r != updated]
        steps = []
        while rest:
            nxt = max(rest, key=lambda r: sum(c in bound for c in relations[r]))
            rest.remove(nxt)
            key = [c for c in relations[nxt] if c in bound]
            steps.append(f"{nxt}: lookup on ({', '.join(key)})" if key else f"{nxt}: scan")
            bound |= set(relations[nxt])
        out[updated] = steps
    return out
