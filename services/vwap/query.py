"""Options of the vwap service, their validation, the relations it accepts and the engine factory.

One service instance maintains one query (``query``) with one strategy; its parameters default to the
spec's constants (0.25 for DBToaster's VWAP, 0.75 for the paper's, 'Brand#23'/'WRAP BOX' for Q17, 100
for Q18) and are exact: fractions are given as "1/4" or "0.25" and compared by cross-multiplication.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from services.vwap.catalog import QUERIES, STRATEGIES
from services.vwap.engine import VwapEngine
from services.vwap.numbers import parse_fraction
from shared.config import Option
from shared.events import Relation

PARAMS = ("fraction", "variant", "brokers", "brand", "container", "threshold")


def _choice(names: Sequence[str]) -> Any:
    def parse(v: Any) -> str:
        if v not in names:
            raise ValueError(f"must be one of {', '.join(names)}")
        return v

    return parse


def _fraction(v: Any) -> str | None:
    """Kept as canonical text ("1/4") so options stay JSON-friendly; the engine parses it again."""
    if v is None:
        return None
    f = parse_fraction(v, "fraction")
    if f < 0:
        raise ValueError("must be >= 0")
    return str(f)


def _opt_str(v: Any) -> str | None:
    if v is None or (type(v) is str and v):
        return v
    raise ValueError("must be a non-empty string")


def _opt_positive_int(v: Any) -> int | None:
    if v is None or (type(v) is int and v > 0):
        return v
    raise ValueError("must be a positive integer")


def _opt_number(v: Any) -> str | None:
    if v is None:
        return None
    return str(parse_fraction(v, "threshold"))


OPTIONS = {
    "query": Option("vwap", _choice(tuple(QUERIES)), f"the query to maintain: {', '.join(QUERIES)}"),
    "strategy": Option(
        "rpai",
        _choice(STRATEGIES),
        "rpai (the paper), or a baseline: dbtoaster (partial incrementalization), recompute (literal "
        "nested loops), crosscheck (price-keyed descent; vwap and vwap-paper only)",
    ),
    "fraction": Option(
        None,
        _fraction,
        "the query's constant (vwap 1/4, vwap-paper/sq*/nq* 3/4, psp 1/10000, ex21 1/2, q17 1/5)",
    ),
    "variant": Option(
        None, _choice(("a", "b")), "sq1 only: a = per-broker volume (default), b = volume at prices >= p"
    ),
    "brokers": Option(None, _opt_positive_int, "mst only: broker ids are 0..brokers-1 (default 10)"),
    "brand": Option(None, _opt_str, "q17 only: p.brand (default 'Brand#23')"),
    "container": Option(
        None, _opt_str, "q17 only: p.container (default 'WRAP BOX' as in the paper; DBToaster has 'MED BOX')"
    ),
    "threshold": Option(None, _opt_number, "q18 only: SUM(l.quantity) > threshold (default 100)"),
}

# The queries each parameter but ``fraction`` applies to: those whose catalog defaults name it.
_ONLY = {
    name: tuple(q for q, info in QUERIES.items() if name in info.defaults)
    for name in PARAMS
    if name != "fraction"
}


def validate(options: Mapping[str, Any]) -> None:
    """Refuse parameters the chosen query does not have, and strategies it does not run on."""
    query = options.get("query", "vwap")
    info = QUERIES[query]
    strategy = options.get("strategy", "rpai")
    if strategy not in info.strategies:
        raise ValueError(f"query {query!r} runs on strategies {', '.join(info.strategies)}, not {strategy!r}")
    for name, queries in _ONLY.items():
        if options.get(name) is not None and query not in queries:
            raise ValueError(f"{name!r} applies only to query {' / '.join(queries)}, but query is {query!r}")
    if options.get("fraction") is not None and "fraction" not in info.defaults:
        raise ValueError(f"query {query!r} has no 'fraction' parameter")


def params_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine parameters: the query's defaults overridden by the options given."""
    query = options.get("query", "vwap")
    out = dict(QUERIES[query].defaults)
    for name in PARAMS:
        v = options.get(name)
        if v is None:
            continue
        out[name] = Fraction(v) if name in ("fraction", "threshold") else v
    return out


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    return QUERIES[options.get("query", "vwap")].relations


def make_engine(options: Mapping[str, Any]) -> VwapEngine:
    validate(options)
    query = options.get("query", "vwap")
    return VwapEngine(query, options.get("strategy", "rpai"), params_of(options))
