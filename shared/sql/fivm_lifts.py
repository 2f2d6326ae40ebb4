"""F-IVM's ring lifts as fivm rings: ``SUM([lift<k>: RingCofactor<...>](x) * ...)`` is the cofactor
(covariance) ring over the lifted variables, ``RingRelational`` the listing ring, ``RingFactorized`` the
factorized ring; the join is the natural join of the FROM list (shared names join)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from ivmstream.sql.analyze import Shape
from ivmstream.sql.errors import SqlError
from ivmstream.sql.expr import ColumnRef, by_column, converted
from ivmstream.sql.fivm_plan import prune_order
from ivmstream.sql.joins import variables
from ivmstream.sql.model import Script
from ivmstream.sql.plan import Feed, Unit, ViewPlan

LIFT_RINGS = {
    "ringcofactor": "covariance",
    "ringcofactorgeneral": "covariance",
    "ringrelational": "listing",
    "ringfactorized": "factorized",
}
_CAST = {"int": int, "float": float, "str": str}


def _ring(shape: Shape, script: Script) -> str:
    rings = set()
    for name in shape.view.lifts.values():
        ring = script.types.get(name) or LIFT_RINGS.get(name)
        if ring is None:
            raise SqlError(
                f"unknown ring type {name!r} in a lift "
                f"(known: {', '.join(sorted(LIFT_RINGS))}, or CREATE TYPE)",
                shape.view.where,
            )
        rings.add(ring)
    if len(rings) != 1:
        raise SqlError(f"one view lifts into one ring, not {', '.join(sorted(rings))}", shape.view.where)
    return rings.pop()


def plan_lifted(shape: Shape, script: Script) -> ViewPlan | None:
    """The fivm plan of a view in F-IVM's dialect (ring lifts), or None for other views."""
    if not shape.view.lifts:
        return None
    ring = _ring(shape, script)
    lifted: list[ColumnRef] = []
    for _name, node in shape.items:
        for col in node.find_all(exp.Column):
            ref = shape.resolve(col)[0]
            if ref not in lifted and ref not in shape.group_by:
                lifted.append(ref)
    var_of, types = variables(shape, lifted + shape.group_by)
    free = list(dict.fromkeys(var_of[r] for r in shape.group_by))
    features = list(dict.fromkeys(var_of[r] for r in lifted))
    relations: dict[str, dict[str, str]] = {}
    feeds = []
    for o in shape.occurrences:
        name = o.alias
        own = [(ref, var) for ref, var in var_of.items() if ref[0] == o.alias]
        relations[name] = {var: types[var] for _r, var in own}
        feeds.append(
            Feed(
                o.table.name, name, [(var, converted(by_column(ref), _CAST[types[var]])) for ref, var in own]
            )
        )
    opts: dict[str, Any] = {"relations": relations, "ring": ring}
    updatable = [o.alias for o in shape.occurrences if not o.table.static]
    if len(updatable) < len(shape.occurrences):
        opts["updatable"] = updatable  # static tables (CREATE TABLE) are loaded first, never updated
    if ring == "covariance":
        opts["features"] = features
        opts["free"] = free or None
    else:
        opts["free"] = free + features
        if ring == "listing":
            opts["emit_rows"] = True
    if script.variable_order is not None:
        opts["variable_order"] = prune_order(script.variable_order, set(types))
    group_names = [
        n
        for n, node in shape.items
        if isinstance(node, exp.Column) and shape.resolve(node)[0] in shape.group_by
    ]
    value_name = next((n for n, node in shape.items if not isinstance(node, exp.Column)), "value")

    def rows(results: Sequence[Any]) -> list[list[Any]]:
        res = results[0]
        if "groups" in res:
            return [[g["key"][v] for v in free] + [g["value"]] for g in res["groups"]]
        value = res.get("value", {k: v for k, v in res.items() if k != "stats"})
        return [[value]]

    plan = {
        "ring": ring,
        "lifts": shape.view.lifts,
        "features" if ring == "covariance" else "free": features if ring == "covariance" else opts["free"],
        "relations": relations,
        "static": [o.alias for o in shape.occurrences if o.table.static],
        "variable_order_source": "imported (IMPORT DTREE)"
        if script.variable_order is not None
        else "derived",
    }
    why = (
        f"F-IVM's dialect: lifts into {ring} ({', '.join(sorted(set(shape.view.lifts.values())))}) over the "
        "natural join, maintained by fivm's view tree"
    )
    cost = (
        "O(m^2) ring operations per update on the updated leaf's root path, m the lifted variables "
        "(O(1) view lookups: the housing join is q-hierarchical on postcode)"
        if ring == "covariance"
        else "O(size of the listed or factorized delta) per update"
    )
    return ViewPlan(
        shape.view,
        "fivm",
        "fivm",
        why,
        plan,
        cost,
        [Unit("fivm", opts, feeds, ring)],
        [*group_names, value_name],
        rows,
    )
