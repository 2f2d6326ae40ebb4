"""Options of the reservoir service (docs/reservoir/algorithm.md §1), their validation and the base
relations events address; the join they describe is ``query.Query``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ivmstream.sdk import (
    Option,
    Parser,
    Relation,
    boolean,
    choice,
    mapping,
    non_negative_int,
    optional,
    positive_int,
    relations_option,
    string,
)
from ivmstream.services.reservoir.predicate import PredicateError, compile_predicate
from ivmstream.services.reservoir.query import REFUSED_TYPES, STRATEGIES, parse_query


def _columns(v: Any) -> list[str]:
    """A base relation's own column names, in order."""
    if not isinstance(v, list) or not v or not all(isinstance(c, str) and c for c in v):
        raise columns.invalid()
    if len(set(v)) != len(v):
        raise ValueError("a relation names a column twice")
    return list(v)


columns: Parser[list[str]] = Parser("a list of column names", _columns)


def _bags(v: Any) -> list[list[str]]:
    if (
        not isinstance(v, list)
        or not v
        or not all(isinstance(b, list) and b and all(isinstance(r, str) for r in b) for b in v)
    ):
        raise bags.invalid()
    return [list(b) for b in v]


bags: Parser[list[list[str]]] = Parser("a list of bags, each a list of relation aliases", _bags)


def _key_columns(v: Any) -> list[str]:
    if (
        not isinstance(v, list)
        or not v
        or not all(isinstance(c, str) and c for c in v)
        or len(set(v)) != len(v)
    ):
        raise key_columns.invalid()
    return list(v)


key_columns: Parser[list[str]] = Parser("a non-empty list of distinct column names", _key_columns)

OPTIONS: dict[str, Option] = {
    "relations": relations_option(
        {"G1": {"src": "int", "mid": "int"}, "G2": {"mid": "int", "dst": "int"}},
        refused=REFUSED_TYPES,
        aliases=None,
        note="the relations' natural join is sampled",
    ),
    "aliases": Option({}, mapping(string()), "{alias: base relation}: aliases that read one base relation"),
    "base_columns": Option(
        {},
        mapping(columns),
        "{base: [column, ...]}: a base relation's own column names (default: its first alias's)",
    ),
    "bags": Option(
        None,
        optional(bags),
        "a cyclic join's decomposition: each bag a list of aliases (default: derived, §4)",
    ),
    "keys": Option(
        {},
        mapping(key_columns),
        "{alias: [columns]}: a key of a (referenced) relation; inserts that break it are refused (§2.8)",
    ),
    "k": Option(1000, positive_int(), "the reservoir size"),
    "seed": Option(42, non_negative_int(), "the seed of the engine's random generator"),
    "predicate": Option(None, optional(string()), "θ over result columns, e.g. 'src != dst' (§1.3)"),
    "append_only": Option(False, boolean(), "refuse deletes (dead-lettered) instead of applying them (§5)"),
    "strategy": Option(
        "rsjoin", choice(*STRATEGIES), "rsjoin (the method) or a baseline: " + ", ".join(STRATEGIES)
    ),
    "with_replacement": Option(False, boolean(), "k independent one-result reservoirs (§2.6)"),
}


def validate(options: Mapping[str, Any]) -> None:
    """Refuse configurations that would run something other than asked."""
    query = parse_query(options)
    if options["predicate"] is not None:
        try:
            compile_predicate(options["predicate"], query.columns)
        except PredicateError as exc:
            raise ValueError(str(exc)) from None


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    """The base relations events address (an alias is fed by its base, never directly)."""
    query = parse_query(options)
    return [
        Relation(
            base,
            tuple(
                (c, query.types[a]) for c, a in zip(cols, query.relations[query.fanout[base][0]], strict=True)
            ),
        )
        for base, cols in query.bases.items()
    ]
