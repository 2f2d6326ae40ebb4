"""Options of the firstorder service: the joined relations, the residual predicate, the group-by
variables and the aggregate arguments (docs/firstorder/index.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import (
    Option,
    Parser,
    Relation,
    choice,
    declared_relations,
    optional,
    relations_option,
    string,
)

from .engine import STRATEGIES, query_of
from .expressions import ExpressionError

REFUSED_TYPES = {
    "decimal": "firstorder sums in ints and floats; declare it float",
    "exact": "firstorder sums in ints and floats; declare it float or int",
}


def _names(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    raise ValueError("must be a variable name or a list of names")


def _aggregates(v: Any) -> dict[str, str]:
    if isinstance(v, Mapping) and all(isinstance(k, str) and isinstance(e, str) for k, e in v.items()):
        return dict(v)
    raise ValueError("must be a mapping {name: expression}")


OPTIONS: dict[str, Option] = {
    "relations": relations_option(
        None,
        refused=REFUSED_TYPES,
        aliases="a self-join's occurrences are relations of their own here, fed one event each",
        note="their natural join (shared column names) is the query's",
    ),
    "predicate": Option(
        None,
        optional(string()),
        "θ over the join's variables (any of them, e.g. 'a_price - price > 1000 or t > y_t'); "
        "null: every joined row",
    ),
    "aggregates": Option(
        {},
        Parser("a mapping {name: expression}", _aggregates),
        "the summed expressions over the join's variables, by name (the count is always kept)",
    ),
    "free": Option(
        None, optional(Parser("a variable name or a list of names", _names)), "group-by variables"
    ),
    "strategy": Option(
        "first-order",
        choice(*STRATEGIES),
        "first-order (delta queries, materialised aggregates) or recompute (the baseline)",
    ),
}


def validate(options: Mapping[str, Any]) -> None:
    """Relations declared; free, predicate and aggregates over the join's variables, in the language."""
    if options["relations"] is None:
        raise ValueError("firstorder needs 'relations', the joined relations as {relation: {column: type}}")
    try:
        query_of(options)
    except ExpressionError as exc:
        raise ValueError(str(exc)) from None


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    return declared_relations(options["relations"])
