"""SUM/COUNT/AVG over equi-joins as fivm configurations (F-IVM, docs/sql.md "Classes").

Equi-joined columns become one join variable (fivm joins by shared names), each occurrence becomes a
relation with its join variables, group-by columns and derived factors; selections and factors are
computed at intake. All monomials of degree <= 2 come from one engine in the covariance ring (its
count, sums and sums of products); higher degrees run one sum-ring engine per monomial beside a count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from ivmstream.sql.aggregates import AggregateSpec, aggregate_specs, evaluate_output
from ivmstream.sql.analyze import Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import ColumnRef, Fn, all_of, by_column, converted
from ivmstream.sql.plan import Feed, Unit

FIVM_TYPE = {"int": "int", "float": "float", "exact": "float", "bool": "int", "str": "str", "date": "str"}
Monomial = tuple[str, ...]


def _cast(kind: str) -> Any:
    if kind == "float":
        return float
    if kind == "int":
        return int
    return str


class FivmCompilation:
    """The fivm units of one view and the evaluation of its rows from their results."""

    def __init__(
        self, shape: Shape, variable_order: Any = None, ring: str | None = None, indicator: Any = None
    ) -> None:
        self.shape = shape
        self.var_of: dict[ColumnRef, str] = {}
        self.var_type: dict[str, str] = {}
        self.columns: dict[str, dict[str, tuple[str, Fn]]] = {o.alias: {} for o in shape.occurrences}
        self._join_variables()
        self.free: list[str] = []
        for ref in shape.group_by:
            var = self._variable(ref)
            if var not in self.free:
                self.free.append(var)
        self.specs = aggregate_specs(shape, indicator)
        self.factor_var: dict[tuple[str, str], str] = {}
        self.factor_scale: dict[str, int | None] = {}
        self.spec_monomials: list[list[tuple[Any, Monomial]]] = [
            [(coef, self._monomial(factors)) for coef, factors in spec.terms] for spec in self.specs
        ]
        self.monomials = sorted(
            {m for terms in self.spec_monomials for _c, m in terms} | {()}, key=lambda m: (len(m), m)
        )
        self.variable_order = variable_order
        self.lifted_ring = ring
        self.decimals = self._exact()

    # --- variables -------------------------------------------------------------------------------

    def _join_variables(self) -> None:
        parent: dict[ColumnRef, ColumnRef] = {}

        def find(x: ColumnRef) -> ColumnRef:
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x

        for a, b in self.shape.equi:
            parent[find(a)] = find(b)
        classes: dict[ColumnRef, list[ColumnRef]] = {}
        for ref in list(parent):
            classes.setdefault(find(ref), []).append(ref)
        taken: set[str] = set()
        for members in classes.values():
            members.sort(key=lambda r: [o.alias for o in self.shape.occurrences].index(r[0]))
            kinds = {FIVM_TYPE[self.shape.column_type(m)] for m in members}
            if len(kinds) > 1:
                raise SqlError(
                    f"type mismatch: the equi-joined columns {', '.join('.'.join(m) for m in members)} have "
                    f"types {', '.join(sorted(kinds))}",
                    self.shape.view.where,
                )
            kind = kinds.pop()
            name = self._fresh(members[0], taken)
            for m in members:
                self._bind(m, name, kind)

    def _fresh(self, ref: ColumnRef, taken: set[str]) -> str:
        name = ref[1] if ref[1] not in taken else f"{ref[0]}_{ref[1]}"
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    def _bind(self, ref: ColumnRef, var: str, kind: str) -> None:
        self.var_of[ref] = var
        self.var_type[var] = kind
        self.columns[ref[0]][var] = (kind, converted(by_column(ref), _cast(kind)))

    def _variable(self, ref: ColumnRef) -> str:
        if ref in self.var_of:
            return self.var_of[ref]
        name = self._fresh(ref, set(self.var_type))
        self._bind(ref, name, FIVM_TYPE[self.shape.column_type(ref)])
        return name

    def _monomial(self, factors: dict[str, exp.Expression]) -> Monomial:
        out = []
        for alias, node in factors.items():
            key = (alias, node.sql())
            var = self.factor_var.get(key)
            if var is None:
                var = f"f{len(self.factor_var) + 1}_{alias}"
                self.factor_var[key] = var
                fn = self.shape.compiler(by_column).compile(node)
                self.var_type[var] = "float"
                self.columns[alias][var] = ("float", converted(fn, float))
                self.factor_scale[var] = scale_of(self.shape, node)
            out.append(var)
        return tuple(sorted(out))

    def _exact(self) -> int | None:
        """Every factor an exact number of known decimals (DECIMAL(p, s), integers, decimal literals):
        fivm computes in that many places, exactly (``decimals``: its exact rings read each value as
        the decimal its shortest text spells, docs/fivm/rings.md §8); None: floats."""
        scales = [s for s in self.factor_scale.values() if s is not None]
        if not scales or len(scales) < len(self.factor_scale) or max(scales) > MAX_DECIMALS:
            return None
        return max(scales)

    # --- units -----------------------------------------------------------------------------------

    @property
    def degree(self) -> int:
        return max(len(m) for m in self.monomials)

    def relation_name(self, alias: str) -> str:
        """The fivm relation of an occurrence: its alias."""
        return alias

    def relations(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for o in self.shape.occurrences:
            cols = {var: kind for var, (kind, _f) in self.columns[o.alias].items()}
            if not cols:
                raise SqlError(
                    f"relation {o.alias} shares no column with the rest of the query (a cross product)",
                    self.shape.view.where,
                )
            out[self.relation_name(o.alias)] = cols
        return out

    def feeds(self) -> list[Feed]:
        out = []
        for o in self.shape.occurrences:
            conds = self.shape.local.get(o.alias, [])
            keep = None
            if conds:
                keep = all_of([self.shape.compiler(by_column).compile(c) for c in conds])
            cols = [(var, f) for var, (_k, f) in self.columns[o.alias].items()]
            out.append(Feed(o.table.name, self.relation_name(o.alias), cols, keep))
        return out

    def units(self) -> list[Unit]:
        base: dict[str, Any] = {"relations": self.relations(), "free": self.free or None}
        if self.decimals is not None:
            base["decimals"] = self.decimals
        updatable = [self.relation_name(o.alias) for o in self.shape.occurrences if not o.table.static]
        if len(updatable) < len(self.shape.occurrences):
            base["updatable"] = updatable
        if self.variable_order is not None:
            base["variable_order"] = prune_order(self.variable_order, set(self.var_type))
        feeds = self.feeds()
        features = sorted({v for m in self.monomials for v in m})
        if self.degree <= 2:
            ring = {"ring": "covariance", "features": features} if features else {"ring": "count"}
            return [
                Unit(
                    "fivm", {**base, **ring}, feeds, "count, " + ", ".join(features) if features else "count"
                )
            ]
        units = [Unit("fivm", {**base, "ring": "count"}, feeds, "count")]
        for m in self.monomials:
            if m:
                units.append(
                    Unit("fivm", {**base, "ring": "sum", "sum": list(m)}, feeds, "SUM(" + "*".join(m) + ")")
                )
        return units

    # --- results ---------------------------------------------------------------------------------

    def _group_values(self, results: Sequence[Any]) -> dict[tuple[Any, ...], dict[Monomial, Any]]:
        """Group key -> monomial -> value, the groups being those of non-zero count."""
        out: dict[tuple[Any, ...], dict[Monomial, Any]] = {}

        def groups(result: Any) -> list[tuple[tuple[Any, ...], Any]]:
            if "groups" in result:
                return [(tuple(g["key"][v] for v in self.free), g["value"]) for g in result["groups"]]
            if "value" in result:
                return [((), result["value"])]
            return [((), {k: result[k] for k in ("count", "variables", "sum", "sumprod")})]

        if self.degree <= 2:
            for key, value in groups(results[0]):
                if isinstance(value, dict):
                    names = value["variables"]
                    vals: dict[Monomial, Any] = {(): value["count"]}
                    for i, a in enumerate(names):
                        vals[(a,)] = value["sum"][i]
                        for j, b in enumerate(names):
                            vals[tuple(sorted((a, b)))] = value["sumprod"][i][j]
                else:
                    vals = {(): value}
                out[key] = vals
        else:
            for key, value in groups(results[0]):
                out[key] = {(): value}
            for m, result in zip([m for m in self.monomials if m], results[1:], strict=True):
                for key, value in groups(result):
                    if key in out:
                        out[key][m] = value
        return {k: v for k, v in out.items() if v.get((), 0) != 0 or not self.free}

    def output_columns(self) -> list[str]:
        return [name for name, _n in self.shape.items]

    def rows(self, results: Sequence[Any]) -> list[list[Any]]:
        """The view's rows: one per group of non-zero count (one row without GROUP BY)."""
        rows = []
        for key, vals in sorted(self._group_values(results).items(), key=lambda kv: repr(kv[0])):
            aggs: dict[int, Any] = {}
            count = vals.get((), 0)
            for spec, terms in zip(self.specs, self.spec_monomials, strict=True):
                total = sum(float(c) * float(vals.get(m, 0) or 0) for c, m in terms) if terms else 0.0
                aggs[id(spec.node)] = _finish(spec, total, count)
            columns: dict[int, Any] = {}
            for _name, node in self.shape.items:
                if isinstance(node, exp.Column) and not node.find(exp.Select):
                    var = self.var_of[self.shape.resolve(node)[0]]
                    columns[id(node)] = key[self.free.index(var)]
            rows.append([evaluate_output(node, aggs, columns) for _name, node in self.shape.items])
        return rows


MAX_DECIMALS = 30


def scale_of(shape: Shape, node: exp.Expression) -> int | None:
    """The decimals an exact expression's values have at most (products add, sums take the larger);
    None when it may be inexact (a float column, a division)."""
    if isinstance(node, exp.Paren | exp.Neg):
        return scale_of(shape, node.this)
    if isinstance(node, exp.Column):
        ref = shape.resolve(node)[0]
        kind = shape.column_type(ref)
        if kind in ("int", "bool"):
            return 0
        return shape.aliases[ref[0]].scales.get(ref[1]) if kind == "exact" else None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return None
        text = str(node.this)
        return len(text.split(".", 1)[1]) if "." in text else 0
    if isinstance(node, exp.Mul):
        a, b = scale_of(shape, node.this), scale_of(shape, node.expression)
        return None if a is None or b is None else a + b
    if isinstance(node, exp.Add | exp.Sub):
        a, b = scale_of(shape, node.this), scale_of(shape, node.expression)
        return None if a is None or b is None else max(a, b)
    if isinstance(node, exp.Case):
        branches = [i.args["true"] for i in node.args.get("ifs") or []] + [node.args.get("default")]
        scales = [scale_of(shape, b) if b is not None else 0 for b in branches]
        return None if any(s is None for s in scales) else max(s for s in scales if s is not None)
    return None


def prune_order(order: dict[str, Any], keep: set[str]) -> dict[str, Any]:
    """An imported variable order restricted to the compiled variables: a dropped variable's children
    take its place (the order of the rest is kept)."""
    out: dict[str, Any] = {}
    for var, children in order.items():
        pruned = prune_order(children, keep)
        if var in keep:
            out[var] = pruned
        else:
            out.update(pruned)
    return out


def _finish(spec: AggregateSpec, total: float, count: Any) -> Any:
    if spec.kind == "count":
        return int(count) if spec.terms == [(1, {})] else round(total)  # a count under a disjunction
    if spec.kind == "avg":
        return total / float(count) if count else 0.0  # DBToaster: SUM · 1/max(1, COUNT)
    return total


def describe_monomials(comp: FivmCompilation) -> list[str]:
    """The maintained aggregates, readable (``SUM(f1_l * f2_p)``), with each factor's expression."""
    inverse = {var: f"{alias}: {sql}" for (alias, sql), var in comp.factor_var.items()}
    return [("COUNT(*)" if not m else "SUM(" + " * ".join(m) + ")") for m in comp.monomials] + [
        f"{v} = {inverse[v]}" for v in sorted(inverse)
    ]
