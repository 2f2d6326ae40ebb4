"""The F-IVM query configuration: relations, ring, free variables, variable order, updatable relations.

One configuration is one query (docs/fivm/algorithm.md §1): a group-by aggregate over the natural
join of the relations (shared column names join), with payloads in one ring. ``parse_query`` checks
the configuration once and reports the first problem in one line (``EngineError``); everything after
it (order, view tree, plans, engine) may then trust the ``Query``.

Relations are declared in the platform's one form ``{name: {col: type}}`` (``ivmstream.sdk.
parse_relations``, with its shorthands), where a relation may be a self-join alias ``name: {alias_of:
other, columns: [c1, c2, ...]}``: the same stored relation with its columns renamed positionally
(docs/fivm/algorithm.md §2.6). Events address the relation, never an alias.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ivmstream.sdk import EngineError, declared_aliases, parse_relations, relation_columns
from ivmstream.services.fivm.rings.decimals import MAX_DECIMALS

# The declared types fivm cannot use, and why; of the others, ``number`` is computed as a float.
REFUSED_TYPES = {
    "bool": "fivm joins and sums int, float, number and str columns; declare a flag int (0/1) or str",
    "decimal": "fivm sums in int64 or floats (exact to N places with 'decimals: N'); declare it float",
    "exact": "fivm sums in int64 or floats (exact to N places with 'decimals: N'); declare it float or int",
}
_TYPE = {"number": "float"}
RING_NAMES = ("count", "sum", "covariance", "listing", "factorized", "matrix")
STRATEGY_NAMES = (
    "fivm",
    "fivm-one",
    # baselines, docs/fivm/baselines.md
    "1-ivm",
    "1-ivm-ring",
    "dbt",
    "dbt-ring",
    "sql-opt",
    "f-re",
    "dbt-re",
    "reeval",
    "list-keys",
    "list-payloads",
    "fact-payloads",
)
KEYS = (
    "relations",
    "ring",
    "sum",
    "features",
    "free",
    "variable_order",
    "updatable",
    "strategy",
    "indicators",
    "ring_options",
    "debug",
    "decimals",
    "weights",
    "execution",
)
EXECUTIONS = ("auto", "per-tuple")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Rings whose payloads carry the free variables themselves (a listing, a factorized relation): the
# view tree then marginalizes every variable and lifts the free ones (docs/fivm/algorithm.md §2.8).
LIFT_FREE_RINGS = frozenset({"listing", "factorized"})
# Rings whose result is spread over every view (enumeration reads them all): μ stores every view.
DISTRIBUTED_RINGS = frozenset({"factorized"})
# The registry name of each configured ring (the covariance task computes in the cofactor ring).
RING_FACTORY = {"covariance": "cofactor"}


@dataclass(frozen=True)
class RelationDef:
    """One occurrence of a stored relation in the join: ``base`` is the relation events update."""

    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    base: str

    @property
    def is_alias(self) -> bool:
        return self.name != self.base


@dataclass(frozen=True)
class Query:
    occurrences: tuple[RelationDef, ...]  # every relation and alias, in configuration order
    ring: str
    sum: tuple[str, ...]  # sum ring: the summed variables (repeats are powers)
    features: tuple[str, ...]  # covariance: the lifted variables
    free: tuple[str, ...]
    variable_order: Any  # the nested mapping as given (validated by ivmstream.services.fivm.order), or None
    updatable: tuple[str, ...]  # base relations U (configuration order)
    strategy: str
    indicators: bool
    ring_options: tuple[tuple[str, Any], ...]
    debug: bool
    raw: dict[str, Any]  # the normalized configuration (snapshots record it)
    decimals: int | None = None  # exact decimals for sum/covariance values (docs/fivm/rings.md §8)
    weights: tuple[tuple[str, str], ...] = ()  # (relation, column): a tuple counts weight·multiplicity
    execution: str = "auto"  # auto: relation deltas in columns where the ring allows (fivm.md §2.14)

    def weight_of(self, base: str) -> str | None:
        """The column whose value weighs each tuple of ``base`` (docs/fivm/algorithm.md §1.2), if any."""
        return dict(self.weights).get(base)

    @property
    def relations(self) -> tuple[RelationDef, ...]:
        """The stored relations (no aliases), in configuration order."""
        return tuple(o for o in self.occurrences if not o.is_alias)

    def occurrences_of(self, base: str) -> tuple[RelationDef, ...]:
        return tuple(o for o in self.occurrences if o.base == base)

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable, in order of first appearance."""
        out: dict[str, None] = {}
        for o in self.occurrences:
            out.update(dict.fromkeys(o.columns))
        return tuple(out)

    @property
    def var_types(self) -> dict[str, str]:
        return {c: t for o in self.occurrences for c, t in zip(o.columns, o.types, strict=True)}

    def occurrence_count(self, var: str) -> int:
        return sum(var in o.columns for o in self.occurrences)

    @property
    def group_by(self) -> tuple[str, ...]:
        """The free variables the view tree keeps in keys (none for rings that carry them in payloads)."""
        return () if self.ring in LIFT_FREE_RINGS else self.free

    @property
    def lifted(self) -> frozenset[str]:
        """The variables whose lift may differ from 1 (docs/fivm/algorithm.md §1.1, §2.8)."""
        if self.ring == "sum":
            return frozenset(self.sum) | {c for _, c in self.weights}
        if self.ring == "covariance":
            return frozenset(self.features)
        if self.ring in LIFT_FREE_RINGS:
            return frozenset(self.free)
        return frozenset()

    @property
    def distributed(self) -> bool:
        return self.ring in DISTRIBUTED_RINGS

    def ring_factory_options(self) -> dict[str, Any]:
        """Keyword options for the ring factory: the sum ring's domain and powers, ``decimals`` when set,
        plus ``ring_options``."""
        out: dict[str, Any] = {}
        if self.ring == "sum":
            types = self.var_types
            summed = (*self.sum, *(c for _, c in self.weights))  # a weight is lifted by the identity
            out["domain"] = "int" if all(types[v] == "int" for v in summed) else "float"
            powers = {v: self.sum.count(v) for v in dict.fromkeys(self.sum)}
            if any(k > 1 for k in powers.values()):
                out["powers"] = powers
        if self.decimals is not None:
            out["decimals"] = self.decimals
        out.update(dict(self.ring_options))
        return out


def _fail(msg: str) -> EngineError:
    return EngineError(msg)


def _name(v: Any, what: str) -> str:
    if not isinstance(v, str) or not _NAME.match(v):
        raise _fail(f"{what} must be an identifier, got {v!r}")
    return v


def _names(v: Any, what: str, allow_repeats: bool = False) -> tuple[str, ...]:
    if v is None:
        return ()
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, list | tuple):
        raise _fail(f"{what} must be a name or a list of names, got {v!r}")
    out = tuple(_name(x, f"{what} entry") for x in items)
    if not allow_repeats and len(set(out)) != len(out):
        raise _fail(f"{what} lists a name twice: {list(out)}")
    return out


def _occurrences(spec: Any) -> tuple[RelationDef, ...]:
    """The join's occurrences from the platform's relation declaration (``parse_relations``); a
    ``number`` column is a float here (the rings have no mixed int/float domain)."""
    if spec is None:
        raise _fail("'relations' must be a non-empty mapping relation -> columns")
    try:
        declared = parse_relations(spec, refused=REFUSED_TYPES, aliases=None)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    plain = {
        rel: RelationDef(rel, tuple(cols), tuple(_TYPE.get(t, t) for t in cols.values()), rel)
        for rel, cols in relation_columns(declared).items()
    }
    for occ in plain.values():
        for col in occ.columns:
            _name(col, f"relation {occ.name!r}: column name")
    aliases = {a.name: a for a in declared_aliases(declared)}
    out: list[RelationDef] = []
    for rel in declared if isinstance(declared, Mapping) else plain:
        _name(rel, "a relation name")
        if rel in plain:
            out.append(plain[rel])
            continue
        alias = aliases[rel]
        base = plain[alias.alias_of]
        if len(alias.columns) != len(base.columns):
            raise _fail(
                f"alias {rel!r} renames {len(base.columns)} columns of {base.name}, got {list(alias.columns)}"
            )
        cols = _names(list(alias.columns), f"alias {rel!r} columns")
        out.append(RelationDef(rel, cols, base.types, base.name))
    return tuple(out)


def parse_query(config: Mapping[str, Any]) -> Query:
    """Validate and normalize a configuration (see the module docstring); EngineError on the first fault."""
    if not isinstance(config, Mapping):
        raise _fail(f"the fivm configuration must be a mapping, got {type(config).__name__}")
    unknown = [k for k in config if k not in KEYS]
    if unknown:
        raise _fail(f"unknown configuration key(s) {unknown} (known: {', '.join(KEYS)})")
    occs = _occurrences(config.get("relations"))
    types: dict[str, str] = {}
    for o in occs:
        for c, t in zip(o.columns, o.types, strict=True):
            if types.setdefault(c, t) != t:
                raise _fail(f"variable {c!r} is {types[c]} in one relation and {t} in {o.name!r}")
    ring = config.get("ring", "count")
    if ring not in RING_NAMES:
        raise _fail(f"ring must be one of {', '.join(RING_NAMES)}, got {ring!r}")

    def variables(key: str, allow_repeats: bool = False) -> tuple[str, ...]:
        out = _names(config.get(key), f"'{key}'", allow_repeats)
        missing = [v for v in out if v not in types]
        if missing:
            raise _fail(f"'{key}' names variables no relation has: {missing}")
        return out

    free = variables("free")
    sums = variables("sum", allow_repeats=True)
    features = variables("features")
    weights = _weights(config.get("weights"), occs, ring, free, sums, config.get("variable_order"))
    if ring == "sum" and not sums and not weights:
        raise _fail("ring sum needs 'sum': the variable (or list of variables) summed")
    if ring != "sum" and sums:
        raise _fail(f"'sum' applies only to ring sum, not {ring!r}")
    if ring != "covariance" and features:
        raise _fail(f"'features' applies only to ring covariance, not {ring!r}")
    if ring == "covariance" and not features:
        counts = {v: sum(v in o.columns for o in occs) for v in types}
        features = tuple(v for v in types if counts[v] == 1 and v not in free)
    for v in (*sums, *features):
        if types[v] == "str":
            raise _fail(f"variable {v!r} is a string; only int and float variables can be summed")
        if v in free and ring not in LIFT_FREE_RINGS:
            raise _fail(f"variable {v!r} is free (a group-by key), so it cannot also be aggregated")

    bases = [o.name for o in occs if not o.is_alias]
    updatable_raw = config.get("updatable")
    updatable = bases if updatable_raw is None else list(_names(updatable_raw, "'updatable'"))
    for r in updatable:
        if r not in bases:
            raise _fail(f"'updatable' names {r!r}, which is not a relation (aliases follow their relation)")
    strategy = config.get("strategy", "fivm")
    if strategy not in STRATEGY_NAMES:
        raise _fail(f"strategy must be one of {', '.join(STRATEGY_NAMES)}, got {strategy!r}")
    if strategy == "fivm-one" and (updatable_raw is None or len(updatable) != 1):
        raise _fail(
            "strategy fivm-one needs 'updatable' to name exactly one relation (the largest); "
            "the engine cannot know sizes before the data arrives"
        )
    indicators = config.get("indicators", False)
    debug = config.get("debug", False)
    for key, v in (("indicators", indicators), ("debug", debug)):
        if not isinstance(v, bool):
            raise _fail(f"'{key}' must be true or false, got {v!r}")
    execution = config.get("execution", "auto")
    if execution not in EXECUTIONS:
        raise _fail(f"'execution' must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
    decimals = config.get("decimals")
    if decimals is not None:
        if decimals.__class__ is not int or not 0 <= decimals <= MAX_DECIMALS:
            raise _fail(f"'decimals' must be an integer from 0 to {MAX_DECIMALS} (or null), got {decimals!r}")
        if ring not in ("sum", "covariance"):
            raise _fail(f"'decimals' applies to rings sum and covariance, not {ring!r}")
    ring_options = config.get("ring_options") or {}
    if not isinstance(ring_options, Mapping):
        raise _fail(f"'ring_options' must be a mapping, got {ring_options!r}")
    order = config.get("variable_order")
    if order is not None and not isinstance(order, Mapping):
        raise _fail(f"'variable_order' must be a nested mapping {{var: {{child: ...}}}}, got {order!r}")
    updatable_t = tuple(r for r in bases if r in updatable)
    raw = {
        "relations": {
            o.name: (
                {"alias_of": o.base, "columns": list(o.columns)}
                if o.is_alias
                else [{c: t} for c, t in zip(o.columns, o.types, strict=True)]
            )
            for o in occs
        },
        "ring": ring,
        "sum": list(sums),
        "features": list(features),
        "free": list(free),
        "variable_order": order,
        "updatable": list(updatable_t),
        "strategy": strategy,
        "indicators": indicators,
        "ring_options": dict(ring_options),
        "debug": debug,
    }
    if decimals is not None:
        raw["decimals"] = decimals
    if weights:
        raw["weights"] = dict(weights)
    if execution != "auto":
        raw["execution"] = execution
    try:
        raw = orjson.loads(orjson.dumps(raw))  # JSON-equal to what state entries record
    except TypeError as exc:
        raise _fail(f"the configuration must be JSON-serializable: {exc}") from None
    return Query(
        occurrences=occs,
        ring=ring,
        sum=sums,
        features=features,
        free=free,
        variable_order=order,
        updatable=updatable_t,
        strategy=strategy,
        indicators=indicators,
        ring_options=tuple(sorted(ring_options.items())),
        debug=debug,
        raw=raw,
        decimals=decimals,
        weights=weights,
        execution=execution,
    )


def _order_names(order: Any) -> set[str]:
    """Every name a configured variable order mentions (its nesting is checked by ``order``)."""
    out: set[str] = set()
    stack = [order]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            out.update(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, str):
            out.add(node)
    return out


def _weights(
    spec: Any,
    occs: tuple[RelationDef, ...],
    ring: str,
    free: tuple[str, ...],
    sums: tuple[str, ...],
    order: Any,
) -> tuple[tuple[str, str], ...]:
    """``weights: {relation: column}`` (docs/fivm/algorithm.md §1.2): the column's value multiplies
    each tuple's multiplicity. It is lifted by the identity in the sum ring, so it must be a numeric
    column private to its relation, bound, and summed out inside the relation's leaf."""
    if spec is None or spec == {}:
        return ()
    if not isinstance(spec, Mapping):
        raise _fail(f"'weights' must be a mapping relation -> numeric column, got {spec!r}")
    if ring != "sum":
        raise _fail(f"'weights' applies to ring sum (a weight multiplies the summed product), not {ring!r}")
    by_name = {o.name: o for o in occs}
    aliased = {o.base for o in occs if o.is_alias}
    named = _order_names(order) if order is not None else set()
    out: list[tuple[str, str]] = []
    for rel, col in spec.items():
        occ = by_name.get(rel)
        if occ is None or occ.is_alias:
            raise _fail(f"'weights' names {rel!r}, which is not a relation (aliases follow their relation)")
        if rel in aliased:
            raise _fail(f"'weights': {rel!r} has an alias; weighted self-joins are not supported")
        if not isinstance(col, str) or col not in occ.columns:
            raise _fail(f"'weights': {rel}.{col} is not a column of {rel!r} ({list(occ.columns)})")
        if occ.types[occ.columns.index(col)] == "str":
            raise _fail(f"'weights': {rel}.{col} is a string column; a weight must be int or float")
        shared = [o.name for o in occs if o.name != rel and col in o.columns]
        if shared:
            raise _fail(f"'weights': {rel}.{col} is a join variable (also in {shared}); a weight is private")
        if col in free:
            raise _fail(f"'weights': {rel}.{col} is free (a group-by key), so it cannot weigh tuples")
        if col in sums:
            raise _fail(f"'weights': {rel}.{col} is also summed; list it in one of 'sum' and 'weights'")
        if col in named:
            raise _fail(
                f"'weights': {rel}.{col} must not appear in variable_order (it is summed out in {rel}'s leaf)"
            )
        out.append((rel, col))
    return tuple(out)
