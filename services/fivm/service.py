"""Declaration of the fivm service: SUM aggregates over joins in payload rings, maintained by F-IVM.

The options are the query configuration of ``query`` (docs/algorithms/fivm.md §1.3), one
config key each, plus ``model``: a linear regression fitted from a covariance result whenever the
result is read (docs/algorithms/fivm-rings.md §7). The engine is ``FivmEngine``; ``ServiceEngine`` only
puts its result into the service's result form (docs/algorithms/fivm.md §7.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ivmstream.sdk import (
    DemoWorkload,
    Option,
    Parser,
    Relation,
    ServiceDefinition,
    boolean,
    choice,
    mapping,
    non_negative_int,
    optional,
)
from ivmstream.services.fivm import model
from ivmstream.services.fivm.engine import FivmEngine
from ivmstream.services.fivm.intake import FACTORIZED_SUFFIX
from ivmstream.services.fivm.query import KEYS, RING_NAMES, STRATEGY_NAMES, Query, parse_query

DATA = Path(__file__).with_name("data")

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
    """``{label, ridge}``: the label must be a name, ridge (default 0) a finite number >= 0."""
    spec = _model_keys(v)
    if not isinstance(spec.get("label"), str):
        raise ValueError("must give 'label', the name of the covariance feature to predict")
    ridge = spec.get("ridge", 0.0)
    if type(ridge) not in (int, float) or not math.isfinite(ridge) or ridge < 0:
        raise ValueError(f"'ridge' must be a finite number >= 0, got {ridge!r}")
    return {"label": spec["label"], "ridge": float(ridge)}


_model_keys = mapping(keys=("label", "ridge"))

OPTIONS: dict[str, Option] = {
    "relations": Option(
        {name: list(cols) for name, cols in HOUSING.items()},
        mapping(),
        "the joined relations: {name: [column, {column: int|float|str}, ...]} (a bare column is a "
        "float), or a self-join alias {alias_of: relation, columns: [...]}; default: the Housing schema",
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
        "(docs/algorithms/fivm.md §2.13)",
        state=False,  # which event forms are accepted; the stored views do not depend on it
    ),
    "model": Option(
        None,
        optional(Parser("a mapping {label: name, ridge: number >= 0}", _model)),
        "ring covariance without free variables: fit label ~ the other features (ridge λ) on each result",
        state=False,  # computed from the result when it is read; the stored views do not depend on it
    ),
}
# Query keys this declaration does not know yet still reach the engine, which checks them.
for _key in KEYS:
    OPTIONS.setdefault(_key, Option(None, lambda v: v, f"query key {_key!r} (docs/algorithms/fivm.md §1.3)"))


def query_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's configuration: the query keys that are set (an unset key takes the engine's default);
    ``emit_rows`` is the listing ring's ``rows`` option."""
    config = {k: options[k] for k in KEYS if options[k] is not None}
    if options["emit_rows"]:
        if options["ring"] != "listing":
            raise ValueError(
                "emit_rows lists the rows of ring listing (for factorized payloads use strategy "
                "fact-payloads with ring listing)"
            )
        config["ring_options"] = {**(config.get("ring_options") or {}), "rows": True}
    return config


def validate(options: Mapping[str, Any]) -> None:
    """The engine's own checks (it is built once, so bad orders and ring options fail here too), and
    that ``model`` has a covariance result without groups to read, with its label among the features."""
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


def shape_result(query: Query, result: Mapping[str, Any], spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """``FivmEngine.result()`` in the service's result form (docs/algorithms/fivm.md §7.2).

    count, sum and matrix keep ``{"value": v}`` or ``{"groups": [...]}``; a covariance result is its
    ``count``, ``variables``, ``sum`` and ``sumprod`` (with ``model`` when configured); listing and
    factorized results give the ``join_size``. ``stats`` always follows."""
    if "groups" in result:
        return dict(result)
    value = result["value"]
    out: dict[str, Any]
    if query.ring == "covariance":
        out = dict(value)
        if spec is not None:
            features = [f for f in query.features if f != spec["label"]]
            out["model"] = model.fit(value, spec["label"], features, spec["ridge"])
    elif query.ring == "listing":
        out = dict(value)
    elif query.ring == "factorized":
        rest = dict(value)
        out = {"join_size": rest.pop("count"), **rest}
    else:
        out = {"value": value}
    out["stats"] = result["stats"]
    return out


class ServiceEngine(FivmEngine):
    """``FivmEngine`` with the service's result form; state, snapshots and refusals are the engine's."""

    def __init__(self, config: Mapping[str, Any], model_spec: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.model_spec = model_spec

    def result(self) -> dict[str, Any]:
        return shape_result(self.query, super().result(), self.model_spec)


def make_engine(options: Mapping[str, Any]) -> ServiceEngine:
    return ServiceEngine(query_config(options), options["model"])


# The demo: a covariance ring over the Housing sample (services/fivm/data/README.md), computed exactly
# in four decimals, so results do not depend on how the stream is batched. Demographics and Transport
# are static: they load first, then updates to them are refused.
DEMO_FEATURES = (
    "price",
    "livingarea",
    "nbbedrooms",
    "nbbathrooms",
    "pricerangeshop",
    "averagesalary",
    "crimesperyear",
    "distancecitycentre",
)
DEMO_CONFIG: dict[str, Any] = {
    "relations": {name: [{"postcode": "int"}, *cols[1:]] for name, cols in HOUSING.items()},
    "ring": "covariance",
    "features": list(DEMO_FEATURES),
    "decimals": 4,
    "updatable": ["House", "Shop", "Institution", "Restaurant"],
    "model": {"label": "price", "ridge": 1.0},
    "key_field": "region",
}

SERVICE = ServiceDefinition(
    name="fivm",
    summary="SUM aggregates over joins in payload rings (counts, covariance matrices, listings), F-IVM",
    options=OPTIONS,
    relations=relations,
    engine=make_engine,
    validate=validate,
    demo=DemoWorkload(input=DATA / "housing.jsonl", config=DEMO_CONFIG, partitions=2),
    state_version=1,
    sharding="ivmstream.services.fivm.sharding:SHARDING",  # one query over workers: docs/architecture.md
    batch="ivmstream.services.fivm.batch:JOBS",  # Spark bootstrap and reconcile: docs/algorithms/fivm.md §8
)
