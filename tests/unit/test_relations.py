"""One relation declaration for every service that reads relations its config names.

``{relation: {column: type}}`` with the seven column types: each service accepts a type and then takes
events carrying it, or refuses the declaration in one line saying why it cannot use the type. The
shorthands mean the same in every service.
"""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.config import build_config
from ivmstream.events import COLUMN_TYPES, UpdateEvent
from ivmstream.options import ConfigError
from ivmstream.sdk import BARE_COLUMN_TYPE, COLUMN_TYPE_MEANINGS, describe, parse_relations
from ivmstream.service import load_service

# What else each service needs to run a query over R(k, v).
EXTRA: dict[str, dict[str, Any]] = {
    "fivm": {"ring": "count"},
    "reservoir": {"k": 5},
    "sketches": {
        "query": "SELECT k, COUNT(*) AS n FROM r GROUP BY k",
        "partition": {"r": {"column": "k", "ranges": 4, "domain": [0, 100]}},
    },
    "reference": {},
}
# Types a service refuses, with a word of its reason; every other type it accepts.
REFUSED = {
    "fivm": {
        "bool": "declare a flag int",
        "decimal": "sums in int64 or floats",
        "exact": "sums in int64 or floats",
    },
    "reservoir": {"decimal": "without exact decimals", "exact": "without exact decimals"},
    "sketches": {},
    "reference": {},
}
# How a service computes with a type it accepts under another name (a fivm number is a float).
STORED = {("fivm", "number"): "float"}
SAMPLE = {"int": 7, "float": 2.5, "number": 3, "str": "x", "bool": True, "decimal": "1.25", "exact": "1.5"}


def _config(name: str, relations: Any) -> dict[str, Any]:
    return {"relations": relations, **EXTRA[name]}


@pytest.mark.parametrize("typ", sorted(COLUMN_TYPES))
@pytest.mark.parametrize("name", sorted(EXTRA))
def test_every_service_takes_the_one_form_and_each_type_or_says_why_not(name: str, typ: str) -> None:
    service = load_service(name)
    declared = {"R": {"k": "int", "v": typ}}
    if typ in REFUSED[name]:
        with pytest.raises(ConfigError) as info:
            build_config(service, _config(name, declared))
        message = str(info.value)
        assert "\n" not in message
        assert f"relation 'R': column 'v' is {typ}: {name}" in message
        assert REFUSED[name][typ] in message
        return
    options = build_config(service, _config(name, declared)).options
    [relation] = [r for r in service.relations(options) if r.name.lower() == "r"]
    assert dict(relation.columns) == {"k": "int", "v": STORED.get((name, typ), typ)}
    engine = service.engine(options)
    value = COLUMN_TYPES[dict(relation.columns)["v"]](SAMPLE[typ])
    assert list(engine.apply([UpdateEvent(relation.name, {"k": 1, "v": value}, 1)])) == []


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_the_shorthands_mean_the_same_in_every_service(name: str) -> None:
    service = load_service(name)

    def columns(relations: Any) -> dict[str, str]:
        options = build_config(service, _config(name, relations)).options
        [relation] = [r for r in service.relations(options) if r.name.lower() == "r"]
        return dict(relation.columns)

    one_form = columns({"R": {"k": "int", "v": BARE_COLUMN_TYPE}})
    assert columns({"R": [{"k": "int"}, "v"]}) == one_form
    assert columns({"R": [{"k": "int"}, {"v": BARE_COLUMN_TYPE}]}) == one_form


def test_the_canonical_form_does_not_depend_on_the_spelling() -> None:
    assert parse_relations({"R": ["a", {"b": "int"}]}) == {"R": {"a": "number", "b": "int"}}
    assert parse_relations({"R": {"a": "number", "b": "int"}}) == {"R": {"a": "number", "b": "int"}}
    assert parse_relations("tpch") == "tpch"
    with pytest.raises(ValueError, match="self-join alias: no self-join aliases here"):
        parse_relations({"R": ["a"], "S": {"alias_of": "R", "columns": ["b"]}})
    with pytest.raises(ValueError, match="unknown type 'date'"):
        parse_relations({"R": {"a": "date"}})
    assert set(COLUMN_TYPE_MEANINGS) == set(COLUMN_TYPES)


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("triangles", "mode graph: {edges: {src: int, dst: int}}"),
        ("triangles", "mode relations: {R: {a: int, b: int}, S: {b: int, c: int}, T: {c: int, a: int}}"),
        ("vwap", "query ex21: {R: {a: exact, b: exact}}"),
    ],
)
def test_fixed_relations_are_described_in_the_one_form(name: str, line: str) -> None:
    assert line in load_service(name).relations_help()


def test_services_that_declare_relations_say_so_in_their_help() -> None:
    for name in EXTRA:
        [line] = load_service(name).relations_help()
        assert line.startswith("relations (config key): the relations: {relation: {column: type}}")
    assert "required" in load_service("fivm").relations_help()[0]
    assert (
        "default {items: {item: str, qty: int, price: decimal}}"
        in load_service("reference").relations_help()[0]
    )
    assert describe({"R": {"a": "int"}, "S": {"alias_of": "R", "columns": ["b"]}}) == (
        "{R: {a: int}, S: {alias_of: R, columns: [b]}}"
    )
