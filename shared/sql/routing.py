"""Class recognition and routing: each view to the service built for its class, by its structure.

The classes are tried most specific first (docs/sql.md "Classes"): an IMP provenance statement ->
sketches; a sample of a join -> reservoir; correlated nested aggregates -> vwap's RPAI plans; a
3-cycle count -> triangles; SUM/COUNT/AVG over equi-joins -> fivm; with a predicate (or an aggregate)
across relations that no view tree factorizes -> firstorder (first-order IVM). A view no class covers is
refused with the construct that ruled each out, before anything runs.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from ivmstream.config import build_config
from ivmstream.options import ConfigError
from ivmstream.service import load_service
from ivmstream.sql import classes
from ivmstream.sql.aggregates import NotFactorizable, disjunction_terms
from ivmstream.sql.analyze import AGGREGATES, Shape, analyze
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import position_of
from ivmstream.sql.firstorder_plan import plan_firstorder
from ivmstream.sql.fivm_plan import FivmCompilation, describe_monomials
from ivmstream.sql.model import Script, View
from ivmstream.sql.plan import ViewPlan


def plan_view(view: View, script: Script) -> ViewPlan:
    """The view's plan; SqlError naming what ruled every class out."""
    shape = analyze(view, script)
    derived = [o for o in shape.occurrences if script.tables.get(o.table.name) is not o.table]
    if derived:
        node = next(
            (s for s in view.select.find_all(exp.Subquery) if s.alias.lower() == derived[0].alias),
            view.select,
        )
        raise SqlError(
            f"unsupported: a derived table in FROM ({derived[0].alias}); supported: FROM lists and joins "
            "of declared tables (derived tables only inside the RPAI families' nested aggregates)",
            position_of(view.statement, node),
        )
    for recognise in classes.RECOGNISERS:
        plan = recognise(shape, script)
        if plan is not None:
            check_units(plan)
            return plan
    if shape.nested:
        raise SqlError(
            "unsupported: this nested aggregate matches none of the RPAI plans (VWAP, PSP, MST, TPC-H Q17, "
            "Q18 and their kin); supported otherwise: SUM/COUNT/AVG over equi-joins",
            position_of(view.statement, shape.nested[0]),
        )
    return plan_fivm(shape, script)


def plan_fivm(shape: Shape, script: Script) -> ViewPlan:
    """SUM/COUNT/AVG over equi-joins with selections: fivm."""
    view = shape.view
    indicator = disjunction_terms(shape) if shape.residual else None
    if shape.residual and indicator is None:
        return _first_order(
            shape,
            f"{shape.residual[0].sql()!r} is not an equality nor a disjunction of single-relation conditions",
        )
    if indicator is not None and (shape.group_by or any(n.find(exp.Avg) for _n, n in shape.items)):
        return _first_order(shape, "fivm takes a disjunction across relations without GROUP BY or AVG only")
    if not any(node.find(*AGGREGATES) for _n, node in shape.items):
        raise SqlError(
            "unsupported: a view without aggregates "
            "(a sample of a join needs USING SAMPLE reservoir(k ROWS))",
            view.where,
        )
    try:
        comp = FivmCompilation(shape, script.variable_order, view.ring, indicator)
    except NotFactorizable as exc:
        if view.ring is None and not view.lifts:
            return _first_order(
                shape, f"the aggregate argument {exc.node.sql()!r} is no sum of per-relation products"
            )
        raise SqlError(
            f"unsupported: the aggregate argument {exc.node.sql()!r} mixes relations in a way no sum of "
            "products of per-relation factors expresses",
            position_of(view.statement, exc.node),
        ) from None
    units = comp.units()
    hierarchical = _hierarchical(shape, comp)
    order = _engine_order(units[0].service, units[0].options, view)
    plan: dict[str, Any] = {
        "variable_order": order.get("variable_order"),
        "variable_order_source": "imported (IMPORT DTREE)" if script.variable_order else "derived",
        "views": order.get("views"),
        "relations": units[0].options["relations"],
        "free": comp.free,
        "ring": units[0].options["ring"],
        "decimals": units[0].options.get("decimals"),
        "engines": [u.label for u in units],
        "aggregates": describe_monomials(comp),
        "selections": {a: [c.sql() for c in cs] for a, cs in shape.local.items()},
        "static": [o.alias for o in shape.occurrences if o.table.static],
    }
    if indicator is not None:
        plan["disjunction"] = (
            f"{[r.sql() for r in shape.residual]} as {len(indicator)} inclusion-exclusion terms, each a "
            "product of per-relation indicators"
        )
    joins = len(shape.occurrences)
    over = f"an equi-join of {joins} relations" if joins > 1 else "one relation"
    why = (
        f"SUM/COUNT/AVG over {over}{' with selections' if shape.local else ''}"
        f"{', grouped' if shape.group_by else ''}: F-IVM maintains the aggregates as payloads of one view "
        "tree; no nested aggregate (vwap), no 3-cycle count (triangles), no sample (reservoir), "
        "no provenance clause (sketches)"
    )
    cost = (
        "O(1) per single-tuple update "
        "(the query is q-hierarchical: every view on the update's path is a lookup)"
        if hierarchical
        else "O(product of the sibling views' sizes on the updated leaf's root path) per single-tuple update "
        "(not q-hierarchical; at most O(N) for acyclic joins with one update per relation)"
    )
    plan_obj = ViewPlan(
        view,
        "fivm",
        "fivm",
        why,
        plan,
        cost,
        units,
        comp.output_columns(),
        comp.rows,
    )
    return plan_obj


def _first_order(shape: Shape, ruled_out: str) -> ViewPlan:
    """A residual predicate (or aggregate) across relations no view tree factorizes: first-order IVM."""
    plan = plan_firstorder(shape, ruled_out)
    check_units(plan)
    return plan


def _hierarchical(shape: Shape, comp: FivmCompilation) -> bool:
    """q-hierarchical: atoms of two variables are nested or disjoint, and free variables dominate."""
    atoms: dict[str, set[str]] = {}
    for alias, cols in comp.columns.items():
        for var in cols:
            if not var.startswith("f"):
                atoms.setdefault(var, set()).add(alias)
    names = list(atoms)
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            ax, ay = atoms[x], atoms[y]
            if ax & ay and not (ax <= ay or ay <= ax):
                return False
            if ax < ay and x in comp.free and y not in comp.free:
                return False
    return True


def _engine_order(service_name: str, options: dict[str, Any], view: View) -> dict[str, Any]:
    """The variable order and views fivm builds (read from an empty engine's result stats)."""
    service = load_service(service_name)
    try:
        config = build_config(service, options, source=view.name)
        result = service.engine(config.options).result()
    except ConfigError as exc:
        raise SqlError(f"{service_name} refuses the compiled view: {exc}", view.where) from None
    stats = result.get("stats", {}) if isinstance(result, dict) else {}
    return {"variable_order": stats.get("variable_order"), "views": stats.get("views")}


def check_units(plan: ViewPlan) -> None:
    """Every unit's configuration through the service's declared options (nothing partial runs)."""
    for unit in plan.units:
        service = load_service(unit.service)
        try:
            build_config(service, unit.options, source=plan.view.name)
        except ConfigError as exc:
            raise SqlError(f"{unit.service} refuses the compiled view: {exc}", plan.view.where) from None


def plan_script(script: Script, only: str | None = None) -> list[ViewPlan]:
    """Every view's plan (or one's); SqlError on the first that cannot run."""
    views = script.views
    if only is not None:
        views = [v for v in views if v.name == only]
        if not views:
            raise SqlError(f"no view {only!r} (views: {', '.join(v.name for v in script.views)})")
    plans = []
    for v in views:
        plan = plan_view(v, script)
        if plan.service == "fivm":
            check_units(plan)
        plans.append(plan)
    return plans
