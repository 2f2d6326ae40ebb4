"""Options of the fivm service, their validation and the relations it accepts.

The options are the query configuration of ``query`` (docs/fivm/algorithm.md §1.3), one config key
each, plus ``model``: a linear regression fitted from a covariance result whenever the result is read
(docs/fivm/rings.md §7).
"""

from __future__ import annotations

import math
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
    relations_option,
)
from ivmstream.services.fivm.engine import FivmEngine, query_config
from ivmstream.services.fivm.intake import FACTORIZED_SUFFIX
from ivmstream.services.fivm.model import DEFAULT_MAX_ITERATIONS, DEFAULT_TOLERANCE, METHODS
from ivmstream.services.fivm.query import KEYS, REFUSED_TYPES, RING_NAMES, STRATEGY_NAMES, parse_query

# The authors' Housing schema (one row per postcode in each relation), in their column order.
HOUSING: dict[str, tuple[str, ...]] = {
    "House": (
        "postcode",
        "livingarea",
        "price",
        "nbbedrooms",
        "nbbathrooms",
        "kitchensize",
        "house",
        "flat",
        "unknown",
        "garden",
        "parking",
    ),
    "Shop": ("postcode", "openinghoursshop", "pricerangeshop", "sainsburys", "tesco", "ms"),
    "Institution": ("postcode", "typeeducation", "sizeinstitution"),
    "Restaurant": ("postcode", "openinghoursrest", "pricerangerest"),
    "Demographics": ("postcode", "averagesalary", "crimesperyear", "unemployment", "nbhospitals"),
    "Transport": ("postcode", "nbbuslines", "nbtrainstations", "distancecitycentre"),
}


def _names(v: Any) -> str | list[str]:
    if isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        return v if isinstance(v, str) else list(v)
    raise names.invalid()


names: Parser[str | list[str]] = Parser("a variable name or a list of names", _names)


def _model(v: Any) -> dict[str, Any]:
    """``{label, ridge, method, tolerance, max_iterations}``: the label must be a name, ridge (default 0)
    a finite number >= 0; method closed-form (default) or gradient-descent, whose tolerance (> 0) and
    max_iterations (>= 1) default to the model module's."""
    spec = _model_keys(v)
    if not isinstance(spec.get("label"), str):
        raise ValueError("must give 'label', the name of the covariance feature to predict")
    ridge = spec.get("ridge", 0.0)
    if type(ridge) not in (int, float) or not math.isfinite(ridge) or ridge < 0:
        raise ValueError(f"'ridge' must be a finite number >= 0, got {ridge!r}")
    out: dict[str, Any] = {"label": spec["label"], "ridge": float(ridge)}
    method = spec.get("method", "closed-form")
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "closed-form":
        if "tolerance" in spec or "max_iterations" in spec:
            raise ValueError("'tolerance' and 'max_iterations' belong to method gradient-descent")
        return out
    tolerance = spec.get("tolerance", DEFAULT_TOLERANCE)
    if type(tolerance) not in (int, float) or not math.isfinite(tolerance) or tolerance <= 0:
        raise ValueError(f"'tolerance' must be a finite number > 0, got {tolerance!r}")
    iterations = spec.get("max_iterations", DEFAULT_MAX_ITERATIONS)
    if type(iterations) is not int or iterations < 1:
        raise ValueError(f"'max_iterations' must be an integer >= 1, got {iterations!r}")
    return out | {"method": method, "tolerance": float(tolerance), "max_iterations": iterations}


_model_keys = mapping(keys=("label", "ridge", "method", "tolerance", "max_iterations"))

OPTIONS: dict[str, Option] = {
    "relations": relations_option(
        None,
        refused=REFUSED_TYPES,
        aliases=None,
        note="their natural join is the query's; number columns are computed as floats",
    ),
    "ring": Option("count", choice(*RING_NAMES), "the payload ring: " + ", ".join(RING_NAMES)),
    "sum": Option(None, optional(names), "ring sum: the summed variable(s); a repeat is a power"),
    "features": Option(
        None, optional(names), "ring covariance: the lifted variables (default: every non-join variable)"
    ),
    "free": Option(None, optional(names), "the group-by variables (listing/factorized: the output columns)"),
    "variable_order": Option(
        None, optional(mapping()), "a nested mapping {var: {child: ...}} (default: derived from the join)"
    ),
    "updatable": Option(
        None, optional(names), "the relations that receive updates; the others load first (default: all)"
    ),
    "strategy": Option("fivm", choice(*STRATEGY_NAMES), "fivm, fivm-one or a baseline"),
    "indicators": Option(False, boolean(), "add indicator projections to cyclic joins"),
    "ring_options": Option({}, mapping(), "options of the ring (listing: {rows: true} lists the rows)"),
    "debug": Option(False, boolean(), "check the view invariants after every relation delta (slow)"),
    "decimals": Option(
        None,
        optional(non_negative_int()),
        "rings sum and covariance: compute exactly in this many decimals (results then do not depend "
        "on batching); null: floats",
    ),
    "emit_rows": Option(
        False,
        boolean(),
        "ring listing: results also list the join's rows with their multiplicities "
        "(the same as ring_options {rows: true}, which the stored state records)",
    ),
    "factorized_updates": Option(
        [],
        names,
        "relations that also accept product updates as events of relation '<R>:factorized' "
        "(docs/fivm/algorithm.md §2.13)",
        state=False,  # which event forms are accepted; the stored views do not depend on it
    ),
    "model": Option(
        None,
        optional(
            Parser(
                "a mapping {label: name, ridge: number >= 0, method: closed-form or gradient-descent, "
                "tolerance: number > 0, max_iterations: int >= 1}",
                _model,
            )
        ),
        "ring covariance without free variables: fit label ~ the other features (ridge λ) on each result, "
        "in closed form or by batch gradient descent",
        state=False,  # computed from the result when it is read; the stored views do not depend on it
    ),
}
# Query keys this declaration does not know yet still reach the engine, which checks them.
for _key in KEYS:
    OPTIONS.setdefault(_key, Option(None, lambda v: v, f"query key {_key!r} (docs/fivm/algorithm.md §1.3)"))


def validate(options: Mapping[str, Any]) -> None:
    """The engine's own checks (it is built once, so bad orders and ring options fail here too), and
    that ``model`` has a covariance result without groups to read, with its label among the features."""
    if options["relations"] is None:
        raise ValueError(
            "fivm needs 'relations', the joined relations as {relation: {column: type}} "
            "(the demo's Housing schema is in services/fivm/data/housing.yaml)"
        )
    engine = FivmEngine(query_config(options))
    spec = options["model"]
    if spec is None:
        return
    query = engine.query
    if query.ring != "covariance" or query.free:
        raise ValueError("'model' needs ring covariance without free variables (one Gram matrix to fit)")
    if spec["label"] not in query.features:
        raise ValueError(f"'model' label {spec['label']!r} is not one of the features {list(query.features)}")


def relations(options: Mapping[str, Any]) -> Sequence[Relation]:
    """The stored relations (aliases are not addressed by events) with their column types."""
    query = parse_query(query_config(options))
    out = [Relation(r.name, tuple(zip(r.columns, r.types, strict=True))) for r in query.relations]
    stored = {r.name for r in query.relations}
    chosen = options["factorized_updates"]
    for name in [chosen] if isinstance(chosen, str) else chosen:
        if name not in stored:
            raise ValueError(f"factorized_updates names {name!r}, which is not a relation of the query")
        out.append(Relation(name + FACTORIZED_SUFFIX, (("factors", "str"),)))
    return out
