"""Config parsing and validation of the reservoir service, and the predicate language
(docs/reservoir/algorithm.md §1)."""

from __future__ import annotations

from typing import Any

import pytest

from ivmstream.options import ConfigError
from ivmstream.services.reservoir.options import relations, validate
from ivmstream.services.reservoir.predicate import PredicateError, compile_predicate
from ivmstream.services.reservoir.query import parse_query
from tests.unit.reservoir.oracle import DUMBBELL, LINE3, options


def test_aliases_read_one_base_relation_with_its_own_columns():
    q = parse_query(options(LINE3))
    assert q.fanout == {"E": ("G1", "G2", "G3")}
    assert q.columns == ("a", "b", "c", "d")
    assert [(r.name, r.columns) for r in relations(options(LINE3))] == [
        ("E", (("src", "int"), ("dst", "int")))
    ]
    assert sorted(q.edges) == [(0, 1), (1, 2)]


def test_a_self_join_alias_reads_the_events_of_its_relation():
    q = parse_query(
        options({"relations": {"E": {"a": "int", "b": "int"}, "F": {"alias_of": "E", "columns": ["b", "c"]}}})
    )
    assert q.fanout == {"E": ("E", "F")}
    assert q.columns == ("a", "b", "c")
    with pytest.raises(ValueError, match="'aliases' cannot name it too"):
        parse_query(
            options(
                {
                    "relations": {"E": ["a", "b"], "F": {"alias_of": "E", "columns": ["b", "c"]}},
                    "aliases": {"F": "X"},
                }
            )
        )


def test_the_join_tree_follows_shared_columns():
    q = parse_query(options({"relations": {"R": ["a", "b"], "S": ["c", "d"], "T": ["b", "c"]}}))
    assert sorted(tuple(sorted(e)) for e in q.edges) == [(0, 2), (1, 2)]


def test_a_cyclic_join_gets_a_derived_decomposition_unless_one_is_declared():
    triangle = {"relations": {"R": ["a", "b"], "S": ["b", "c"], "T": ["c", "a"]}}
    q = parse_query(options(triangle))
    assert q.derived == "ghd" and [n.attrs for n in q.nodes] == [("a", "b", "c")]
    q = parse_query(options({**triangle, "bags": [["R", "S", "T"]]}))
    assert q.derived == "declared" and [n.attrs for n in q.nodes] == [("a", "b", "c")]
    assert len(parse_query(options(DUMBBELL)).nodes) == 3
    with pytest.raises(ValueError, match="cyclic"):
        parse_query(options({**triangle, "bags": [["R"], ["S"], ["T"]]}))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"relations": {"R": ["a"], "S": [{"a": "str"}]}}, "is number in one relation"),
        ({"relations": {"R": ["a", "b"]}, "aliases": {"X": "R"}}, "not one of the relations"),
        ({"relations": {"R": ["a", "b"], "S": ["b"]}, "aliases": {"R": "E", "S": "E"}}, "different numbers"),
        ({"relations": {"R": ["a", "b"]}, "base_columns": {"E": ["x", "y"]}}, "no alias reads"),
        ({"relations": {"R": ["a"], "S": ["a"]}, "bags": [["R"]]}, "every relation alias exactly once"),
        ({"relations": {"R": ["a"]}, "predicate": "b > 1"}, "not a column"),
        ({"relations": {"R": ["a"]}, "predicate": "__import__('os').system('true')"}, "outside the language"),
        ({"relations": {"R": ["a"]}, "predicate": "a.real > 1"}, "outside the language"),
        ({"relations": {"R": ["a"]}, "predicate": "a >"}, "not an expression"),
    ],
)
def test_invalid_configs_are_refused_with_the_reason(config: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        validate(options(config))


def test_option_parsers_refuse_bad_values():
    with pytest.raises(ConfigError, match="strategy"):
        options(LINE3, strategy="magic")
    with pytest.raises(ConfigError, match="'k'"):
        options(LINE3, k=0)
    with pytest.raises(ConfigError, match="relations"):
        options({"relations": {"R": [{"a": "decimal"}]}})


@pytest.mark.parametrize(
    ("text", "row", "want"),
    [
        ("a != b", (1, 2), True),
        ("a != b", (2, 2), False),
        ("a < b < 3", (1, 2), True),
        ("a < b < 3", (1, 3), False),
        ("not (a == 1 or b == 1)", (2, 2), True),
        ("(a + b) % 2 == 1 and a * 2 - b // 1 >= -3", (1, 2), True),
        ("a == 'x'", ("x", 0), True),
        ("a > 1", ("x", 0), False),  # a comparison that cannot be made does not qualify
        ("-a == -1", (1, 0), True),
    ],
)
def test_the_predicate_language(text: str, row: tuple[Any, ...], want: bool):
    assert compile_predicate(text, ["a", "b"])(row) is want


def test_the_predicate_has_no_calls_or_attributes():
    for text in ["len(a) > 1", "a.__class__ == 1", "[a][0] == 1", "(lambda: 1)() == 1"]:
        with pytest.raises(PredicateError):
            compile_predicate(text, ["a"])
