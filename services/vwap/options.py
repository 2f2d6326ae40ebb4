"""Options of the vwap service, their validation and the relations it accepts.

One service instance maintains one query (``query``) with one strategy; its parameters default to the
catalog's constants (docs/vwap/algorithm.md §1.2: 0.25 for DBToaster's VWAP, 0.75 for the paper's,
'Brand#23'/'WRAP BOX' for Q17, 100 for Q18) and are exact: fractions are given as "1/4" or "0.25" and
compared by cross-multiplication.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ivmstream.sdk import Option, Relation, choice, fraction, optional, positive_int, string
from ivmstream.services.vwap.catalog import QUERIES, STRATEGIES

PARAMS = ("fraction", "variant", "brokers", "brand", "container", "threshold")


OPTIONS = {
    "query": Option("vwap", choice(*QUERIES), f"the query to maintain: {', '.join(QUERIES)}"),
    "strategy": Option(
        "auto",
        choice(*STRATEGIES),
        "auto (the plan with the least estimated cost for the observed batch and domain sizes, switched "
        "as they change), rpai (the paper), or a baseline: dbtoaster (partial incrementalization), "
        "recompute (literal nested loops), crosscheck (price-keyed descent; vwap and vwap-paper only)",
    ),
    "fraction": Option(
        None,
        optional(fraction(lo=0)),
        "the query's constant (vwap 1/4, vwap-paper/sq*/nq* 3/4, psp 1/10000, ex21 1/2, q17 1/5, q17a 1/200)",
    ),
    "variant": Option(
        None,
        optional(choice("a", "b")),
        "sq1 only: a = per-broker volume (default), b = volume at prices >= p",
    ),
    "brokers": Option(None, optional(positive_int()), "mst only: broker ids are 0..brokers-1 (default 10)"),
    "brand": Option(None, optional(string()), "q17 only: p.brand (default 'Brand#23')"),
    "container": Option(
        None,
        optional(string()),
        "q17 only: p.container (default 'WRAP BOX' as in the paper; DBToaster has 'MED BOX')",
    ),
    "threshold": Option(None, optional(fraction()), "q18 only: SUM(l.quantity) > threshold (default 100)"),
}

# The queries each parameter but ``fraction`` applies to: those whose catalog defaults name it.
_ONLY = {
    name: tuple(q for q, info in QUERIES.items() if name in info.defaults)
    for name in PARAMS
    if name != "fraction"
}


def validate(options: Mapping[str, Any]) -> None:
    """Refuse parameters the chosen query does not have, and strategies it does not run on."""
    query = options["query"]
    info = QUERIES[query]
    strategy = options["strategy"]
    if strategy not in info.strategies:
        raise ValueError(f"query {query!r} runs on strategies {', '.join(info.strategies)}, not {strategy!r}")
    for name, queries in _ONLY.items():
        if options[name] is not None and query not in queries:
            raise ValueError(f"{name!r} applies only to query {' / '.join(queries)}, but query is {query!r}")
    if options["fraction"] is not None and "fraction" not in info.defaults:
        raise ValueError(f"query {query!r} has no 'fraction' parameter")


def params_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine parameters: the query's defaults overridden by the options given."""
    out = dict(QUERIES[options["query"]].defaults)
    for name in PARAMS:
        v = options[name]
        if v is None:
            continue
        out[name] = Fraction(v) if name in ("fraction", "threshold") else v
    return out


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    return QUERIES[options["query"]].relations
