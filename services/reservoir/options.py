"""Options of the reservoir service (docs/algorithms/reservoir.md §1), their validation and the base
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
    string,
)
from ivmstream.services.reservoir.predicate import PredicateError, compile_predicate
from ivmstream.services.reservoir.query import STRATEGIES, TYPES, parse_query


def _columns(v: Any) -> list[tuple[str, str]]:
    """``[col, {col: type}, ...]``; a bare name is an int column."""
    if not isinstance(v, list) or not v:
        raise columns.invalid()
    out: list[tuple[str, str]] = []
    for c in v:
        if isinstance(c, str) and c:
            out.append((c, "int"))
        elif isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], str) and c[1] in TYPES:
            out.append(c)  # already parsed (a declared default): configs never hold tuples
        elif isinstance(c, Mapping) and len(c) == 1:
            ((name, typ),) = c.items()
            if not isinstance(name, str) or typ not in TYPES:
                raise ValueError(f"column {c!r}: the type must be one of {', '.join(TYPES)}")
            out.append((name, typ))
        else:
            raise columns.invalid()
    if len({n for n, _ in out}) != len(out):
        raise ValueError("a relation names a column twice")
    return out


columns: Parser[list[tuple[str, str]]] = Parser("a list of columns (name or {name: int|str|float})", _columns)


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
    "relations": Option(
        {"G1": [("src", "int"), ("mid", "int")], "G2": [("mid", "int"), ("dst", "int")]},
        mapping(columns),
        "the joined relation aliases {alias: [column, {column: int|str|float}, ...]}; natural join",
    ),
    "aliases": Option({}, mapping(string()), "{alias: base relation}: aliases that read one base relation"),
    "base_columns": Option(
        {},
        mapping(columns),
        "{base: [columns]}: a base relation's own column names (default: its first alias's)",
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
    "append_only": Option(False, boolean(), "refuse deletes (dead-lettered) instead of rebuilding (§5)"),
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
