"""Relation declarations: the one config form of every service that reads relations its config names.

The form is ``relations: {relation: {column: type}}`` with the types of ``COLUMN_TYPES``
(``COLUMN_TYPE_MEANINGS`` says what each accepts). Shorthands, with one meaning in every service:

- a list of columns ``[column, {column: type}, ...]``: a bare column is a ``number`` (an integer or a
  float, kept as given);
- ``"tpch"`` as the whole value: the eight TPC-H tables with the columns and types of ``TPCH_TABLES``;
- ``{alias_of: relation, columns: [...]}`` as a relation: a self-join alias, the same stored relation
  with its columns renamed positionally (events address the relation, never the alias).

``parse_relations`` reads every form and returns the canonical one, so that what a service stores (and
the checkpoint envelope records) does not depend on how the config spelled it. A service that cannot
use a type, or aliases, says why; the parser then refuses the declaration in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ivmstream.events.codec import COLUMN_TYPES, Relation
from ivmstream.events.tpch import TPCH_TABLES
from ivmstream.options import Option, Parser

BARE_COLUMN_TYPE = "number"
TPCH = "tpch"
ALIAS_KEYS = frozenset(("alias_of", "columns"))

# What an update's value must be for each type (the codec checks it; ivmstream.events.codec).
COLUMN_TYPE_MEANINGS: dict[str, str] = {
    "int": "an integer",
    "float": "a number, stored as a float (integers become floats)",
    "number": "an integer or a float, kept as given",
    "str": "a string",
    "bool": "true or false",
    "decimal": "an exact decimal: an integer, a decimal string, or a float by its shortest text",
    "exact": "an exact number: an integer stays an integer, anything else becomes an exact decimal",
}
assert set(COLUMN_TYPE_MEANINGS) == set(COLUMN_TYPES)

FORM = "{relation: {column: type}}"
FORM_HELP = (
    f"{FORM}, types {'|'.join(COLUMN_TYPES)}; shorthands: a list [column, {{column: type}}, ...] "
    f"(a bare column is a {BARE_COLUMN_TYPE}), '{TPCH}' (the TPC-H tables)"
)


@dataclass(frozen=True)
class RelationAlias:
    """A self-join occurrence: ``name`` reads the events of ``alias_of`` with its columns renamed."""

    name: str
    alias_of: str
    columns: tuple[str, ...]


def _name(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{what} must be a non-empty string, got {v!r}")
    return v


def _columns(rel: str, spec: Any, refused: Mapping[str, str]) -> dict[str, str]:
    """One relation's ``{column: type}`` from the mapping or the list shorthand."""
    if isinstance(spec, Mapping):
        pairs = list(spec.items())
    elif isinstance(spec, list | tuple):
        pairs = []
        for item in spec:
            if isinstance(item, str):
                pairs.append((item, BARE_COLUMN_TYPE))
            elif isinstance(item, Mapping) and len(item) == 1:
                pairs.append(next(iter(item.items())))
            elif isinstance(item, list | tuple) and len(item) == 2:
                pairs.append((item[0], item[1]))  # an already parsed (column, type) pair
            else:
                raise ValueError(f"relation {rel!r}: a column is 'name' or {{name: type}}, got {item!r}")
    else:
        raise ValueError(f"relation {rel!r} must map its columns to types, got {spec!r}")
    if not pairs:
        raise ValueError(f"relation {rel!r} has no columns")
    out: dict[str, str] = {}
    for col, typ in pairs:
        _name(col, f"relation {rel!r}: a column name")
        if col in out:
            raise ValueError(f"relation {rel!r} names column {col!r} twice")
        if typ not in COLUMN_TYPES:
            known = ", ".join(COLUMN_TYPES)
            raise ValueError(f"relation {rel!r}: column {col!r} has unknown type {typ!r} (known: {known})")
        if typ in refused:
            raise ValueError(f"relation {rel!r}: column {col!r} is {typ}: {refused[typ]}")
        out[col] = typ
    return out


def _is_alias(spec: Any) -> bool:
    return isinstance(spec, Mapping) and set(spec) == ALIAS_KEYS and isinstance(spec["columns"], list | tuple)


def parse_relations(
    value: Any, *, refused: Mapping[str, str] | None = None, aliases: str | None = "no self-join aliases here"
) -> str | dict[str, Any]:
    """The canonical declaration: ``"tpch"``, or ``{relation: {column: type}}`` with aliases as
    ``{alias_of, columns}``. ``refused`` maps the types a service cannot use to why; ``aliases`` is
    why it refuses aliases (None: it takes them). ValueError, one line, on the first fault."""
    refused = refused or {}
    if value == TPCH:
        for name, cols in TPCH_TABLES.items():
            _columns(name, list(cols), refused)
        return TPCH
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"must be {FORM} (or '{TPCH}'), got {value!r}")
    out: dict[str, Any] = {}
    for rel, spec in value.items():
        _name(rel, "a relation name")
        if _is_alias(spec):
            if aliases is not None:
                raise ValueError(f"relation {rel!r} is a self-join alias: {aliases}")
            base = spec["alias_of"]
            if base not in value or _is_alias(value[base]):
                raise ValueError(f"alias {rel!r}: alias_of names no declared relation: {base!r}")
            columns = [_name(c, f"alias {rel!r}: a column name") for c in spec["columns"]]
            out[rel] = {"alias_of": base, "columns": columns}
        else:
            out[rel] = _columns(rel, spec, refused)
    return out


def declared_relations(value: str | Mapping[str, Any]) -> list[Relation]:
    """The stored relations of a canonical declaration (aliases left out: events never address them)."""
    if value == TPCH:
        return [Relation(name, tuple(cols)) for name, cols in TPCH_TABLES.items()]
    assert isinstance(value, Mapping)
    return [Relation(rel, tuple(spec.items())) for rel, spec in value.items() if not _is_alias(spec)]


def relation_columns(value: str | Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``{relation: {column: type}}`` of the stored relations of a canonical declaration."""
    return {r.name: dict(r.columns) for r in declared_relations(value)}


def declared_aliases(value: str | Mapping[str, Any]) -> list[RelationAlias]:
    """The self-join aliases of a canonical declaration, in declaration order."""
    if not isinstance(value, Mapping):
        return []
    return [
        RelationAlias(rel, spec["alias_of"], tuple(spec["columns"]))
        for rel, spec in value.items()
        if _is_alias(spec)
    ]


def relations_parser(
    *, refused: Mapping[str, str] | None = None, aliases: str | None = "no self-join aliases here"
) -> Parser[str | dict[str, Any]]:
    """The config parser of a ``relations`` key (see ``parse_relations``)."""
    return Parser(FORM, lambda v: parse_relations(v, refused=refused, aliases=aliases))


def relations_option(
    default: Any,
    *,
    refused: Mapping[str, str] | None = None,
    aliases: str | None = "no self-join aliases here",
    note: str = "",
) -> Option:
    """The ``relations`` key of a service: one parser, one help text naming the default and the types
    the service refuses. A ``None`` default makes the key required: the value stays None when the key
    is left out, and the service's ``validate`` refuses it, naming what to declare."""
    declared = relations_parser(refused=refused, aliases=aliases)
    parse = declared if default is not None else Parser(FORM, lambda v: None if v is None else declared(v))
    shown = "required" if default is None else f"default {describe(declared(default))}"
    parts = [f"the relations: {FORM_HELP}"]
    if aliases is None:
        parts.append("a relation {alias_of: relation, columns: [...]} is a self-join alias")
    if refused:
        parts.append("refused types: " + ", ".join(refused))
    if note:
        parts.append(note)
    parts.append(shown)
    return Option(default, parse, "; ".join(parts))


def describe(value: str | Mapping[str, Any] | Sequence[Relation]) -> str:
    """A declaration in the one form, as one line: ``{edges: {src: int, dst: int}}``."""
    if isinstance(value, str):
        return value
    rels = dict(value) if isinstance(value, Mapping) else {r.name: dict(r.columns) for r in value}

    def one(spec: Mapping[str, Any]) -> str:
        if _is_alias(spec):
            return f"{{alias_of: {spec['alias_of']}, columns: [{', '.join(spec['columns'])}]}}"
        return "{" + ", ".join(f"{c}: {t}" for c, t in spec.items()) + "}"

    return "{" + ", ".join(f"{rel}: {one(spec)}" for rel, spec in rels.items()) + "}"
