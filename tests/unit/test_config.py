"""Option parsers, the one place defaults are filled, and the config loader built on them."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

import pytest

from ivmstream.config import (
    RUNTIME_OPTIONS,
    ConfigError,
    Option,
    Parser,
    boolean,
    build_config,
    choice,
    fraction,
    mapping,
    non_negative_int,
    optional,
    positive_int,
    positive_number,
    resolve_options,
    string,
)
from ivmstream.engine import Engine
from ivmstream.events import Relation
from ivmstream.options import parse_options, to_fraction
from ivmstream.service import ServiceDefinition, available_services, load_service


def refusal(parse: Any, value: Any) -> str:
    """The message ``parse`` refuses ``value`` with."""
    with pytest.raises(ValueError) as info:
        parse(value)
    return str(info.value)


# ---------------------------------------------------------------- the helpers, one by one

# (parser, accepted values with what they parse to, refused values, the message of a refusal)
HELPERS: list[tuple[str, Parser[Any], list[tuple[Any, Any]], list[Any], str]] = [
    (
        "choice",
        choice("graph", "relations"),
        [("graph", "graph"), ("relations", "relations")],
        ["Graph", "", None, 1, ["graph"]],
        "must be one of graph, relations",
    ),
    (
        "choice-typed",
        choice(1, 2),
        [(1, 1), (2, 2)],
        [True, "1", 1.0, 3],
        "must be one of 1, 2",
    ),
    (
        "boolean",
        boolean(),
        [(True, True), (False, False)],
        ["yes", "true", 1, 0, None],
        "must be true or false",
    ),
    (
        "positive_int",
        positive_int(),
        [(1, 1), (2**70, 2**70)],
        [0, -3, True, 1.0, "5", None],
        "must be a positive integer",
    ),
    (
        "non_negative_int",
        non_negative_int(),
        [(0, 0), (7, 7)],
        [-1, False, 0.0, "0", None],
        "must be an integer >= 0",
    ),
    (
        "positive_number",
        positive_number(),
        [(1, 1.0), (0.25, 0.25)],
        [0, -0.5, math.nan, math.inf, True, "1", None],
        "must be a positive number",
    ),
    (
        "string",
        string(),
        [("a", "a"), ("Brand#23", "Brand#23")],
        ["", 3, None, b"x"],
        "must be a non-empty string",
    ),
    (
        "fraction-unit",
        fraction(0, 1),
        [("1/2", "1/2"), (0.25, "1/4"), (0.1, "1/10"), (1, "1"), (" 3/4 ", "3/4"), (Fraction(1, 3), "1/3")],
        ["3/2", -0.1, True, "x", "1/0", math.nan, math.inf, None, [1]],
        "must be a rational number in [0, 1] like '1/4' or '0.25'",
    ),
    (
        "fraction-at-least",
        fraction(lo=0),
        [(0, "0"), ("7/2", "7/2"), (1e20, "100000000000000000000")],
        [-1, "-1/4"],
        "must be a rational number >= 0 like '1/4' or '0.25'",
    ),
    (
        "fraction-any",
        fraction(),
        [(-5, "-5"), ("2.5", "5/2")],
        ["two", False],
        "must be a rational number like",
    ),
]


@pytest.mark.parametrize(
    ("name", "parse", "accepted", "refused", "message"), HELPERS, ids=[h[0] for h in HELPERS]
)
def test_helper_accepts_and_refuses_with_one_line(name, parse, accepted, refused, message):
    for value, expected in accepted:
        got = parse(value)
        assert got == expected and type(got) is type(expected), (name, value, got)
    for value in refused:
        text = refusal(parse, value)
        assert text.startswith(message), (name, value, text)
        assert "\n" not in text
        assert text == f"must be {parse.expects}"  # the message is what the parser says it accepts


def test_fraction_text_is_exact_and_round_trips():
    parse = fraction(0, 1)
    for value in ("1/3", 0.3, "0.125", 1, "2/6"):
        text = parse(value)
        assert Fraction(text) == to_fraction(value)
    assert parse("2/6") == "1/3"  # canonical: equal values give equal text
    assert fraction(hi=1).expects.startswith("a rational number <= 1")


def test_choice_returns_the_declared_value_and_needs_one():
    assert choice("a", "b")("b") == "b"
    with pytest.raises(TypeError):
        choice()


def test_optional_passes_null_and_keeps_the_inner_message():
    parse = optional(positive_int())
    assert parse(None) is None
    assert parse(3) == 3
    assert refusal(parse, 0) == "must be a positive integer"
    assert parse.expects == "a positive integer or null"
    plain = optional(int)  # a plain function works too, with a generic description
    assert plain(None) is None and plain("4") == 4
    assert plain.expects == "a valid value or null"


def test_mapping_parses_values_and_names_the_key_that_fails():
    parse = mapping(positive_int())
    assert parse({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert refusal(parse, {"a": 1, "b": 0}) == "for b: must be a positive integer"
    assert refusal(parse, [("a", 1)]) == "must be a mapping of names to a positive integer"
    assert refusal(parse, {1: 1}) == "must be a mapping of names to a positive integer"
    given = {"x": {"y": 1}}
    copied = mapping()(given)
    assert copied == given and copied is not given


def test_mapping_with_keys():
    exact = mapping(fraction(0, 1), keys=("R", "S", "T"), exact=True)
    assert exact({"R": "1/2", "S": 0, "T": 1.0}) == {"R": "1/2", "S": "0", "T": "1"}
    assert refusal(exact, {"R": 1}) == "must be a mapping that gives exactly R, S and T: missing S, T"
    assert refusal(exact, {"R": 1, "S": 1, "T": 1, "X": 1}).endswith(": unknown 'X'")
    among = mapping(keys=("consumer", "producer"))
    assert among({}) == {} and among({"producer": {"acks": "all"}}) == {"producer": {"acks": "all"}}
    assert refusal(among, {"consumer": {}, "admin": {}}) == (
        "must be a mapping with keys among consumer, producer: unknown 'admin'"
    )
    with pytest.raises(TypeError):
        mapping(exact=True)


# ---------------------------------------------------------------- defaults, filled in one place

DECLARED = {
    "mode": Option("graph", choice("graph", "relations"), "mode"),
    "limit": Option(None, optional(positive_int()), "limit"),
    "tags": Option({"a": "1"}, mapping(), "tags"),
}


def test_parse_options_fills_every_default_and_parses_what_is_given():
    assert parse_options(DECLARED, {}, owner="test") == {"mode": "graph", "limit": None, "tags": {"a": "1"}}
    assert parse_options(DECLARED, {"limit": 5}, owner="test") == {
        "mode": "graph",
        "limit": 5,
        "tags": {"a": "1"},
    }
    options = parse_options(DECLARED, {}, owner="test")
    options["tags"]["b"] = "2"  # one config's options are its own: the declared default is unchanged
    assert DECLARED["tags"].default == {"a": "1"}


def test_parse_options_errors_name_the_key_the_owner_and_the_source():
    with pytest.raises(ConfigError) as info:
        parse_options(DECLARED, {"lmit": 5}, owner="service demo", source="c.yaml")
    assert str(info.value) == "c.yaml: unknown config key 'lmit' for service demo (known: limit, mode, tags)"
    with pytest.raises(ConfigError) as info:
        parse_options(DECLARED, {"mode": "x"}, owner="service demo", source="c.yaml")
    assert str(info.value) == "c.yaml: config key 'mode' must be one of graph, relations (got 'x')"


class NoDefaultsHere(Mapping[str, Any]):
    """Options that refuse ``get``: code given complete options indexes them and restates no default."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError(f"options.get({key!r}, ...) restates a default that resolve_options fills")


SERVICES = sorted(available_services())


@pytest.mark.parametrize("name", SERVICES)
def test_every_declared_default_is_a_value_its_parser_accepts(name):
    service = load_service(name)
    for key, opt in {**RUNTIME_OPTIONS, **service.options}.items():
        assert opt.parse(opt.default) == opt.default, (name, key)
        assert opt.help, (name, key)


# The keys a service requires (no default stands in for them), with a value each.
REQUIRED: dict[str, dict[str, Any]] = {
    "fivm": {"relations": {"R": {"a": "int", "b": "float"}}},
    "firstorder": {"relations": {"R": {"a": "int", "b": "float"}}},
}


def test_a_service_refuses_to_run_without_a_key_it_requires():
    with pytest.raises(ConfigError, match="fivm needs 'relations', the joined relations as"):
        build_config(load_service("fivm"), {})


@pytest.mark.parametrize("name", SERVICES)
def test_services_take_complete_options_and_restate_no_default(name):
    service = load_service(name)
    required = REQUIRED.get(name, {})
    options = resolve_options(service, required)
    assert options == dict(build_config(service, required).options)
    assert set(options) == set(service.options)
    strict = NoDefaultsHere(options)
    if service.validate is not None:
        service.validate(strict)
    assert service.relations(strict)
    engine = service.engine(strict)
    assert isinstance(engine.snapshot(), bytes)


def test_resolve_options_validates_combinations_of_a_service():
    triangles = load_service("triangles")
    options = resolve_options(triangles, {"mode": "relations", "strategy": "first-order"})
    assert options["epsilon"] is None and options["always_iterate_s"] is False and options["id_type"] == "int"
    assert triangles.engine(options).result()["count"] == 0
    with pytest.raises(ConfigError, match="'epsilon' applies only to strategy 'ivm-eps'"):
        resolve_options(triangles, {"strategy": "first-order", "epsilon": "1/2"}, source="bench")
    with pytest.raises(ConfigError, match=r"^bench: unknown config key 'batch_size' for service triangles"):
        resolve_options(triangles, {"batch_size": 10}, source="bench")  # runtime keys belong to build_config
    assert resolve_options(DECLARED, {"mode": "relations"})["mode"] == "relations"


def test_build_config_fills_runtime_defaults_and_derives_topics_from_the_name():
    seen: list[Mapping[str, Any]] = []

    def engine(options: Mapping[str, Any]) -> Engine:
        raise AssertionError("not built here")

    service = ServiceDefinition(
        name="demo",
        summary="a test declaration",
        options={"mode": DECLARED["mode"]},
        relations=lambda o: [Relation("r", (("a", "int"),))],
        engine=engine,
        validate=seen.append,
    )
    config = build_config(service, {"input_topic": "in.x", "kafka": {"consumer": {"fetch.wait.max.ms": 5}}})
    assert config.options == {"mode": "graph"} and seen == [{"mode": "graph"}]
    assert (config.input_topic, config.output_topic, config.dlq_topic) == ("in.x", "demo.results", "demo.dlq")
    assert config.batch_size == RUNTIME_OPTIONS["batch_size"].default
    assert config.checkpoint_interval == RUNTIME_OPTIONS["checkpoint_interval"].default
    assert config.kafka == {"consumer": {"fetch.wait.max.ms": 5}}
    assert build_config(service, {}).kafka == {}
    for raw, needle in [
        ({"key_field": ""}, "'key_field' must be a non-empty string"),
        ({"dlq_topic": "a b"}, "'dlq_topic' must be a Kafka topic name"),
        ({"checkpoint_interval": 0}, "'checkpoint_interval' must be a positive number"),
        (
            {"kafka": {"admin": {}}},
            "'kafka' must be a mapping with keys among consumer, producer: unknown 'admin'",
        ),
        ({"mode": "x"}, "'mode' must be one of graph, relations"),
    ]:
        with pytest.raises(ConfigError) as info:
            build_config(service, raw, source="c.yaml")
        assert needle in str(info.value) and "\n" not in str(info.value)


def test_service_declarations_load_without_the_config_loader():
    """ivmstream.service depends on ivmstream.options only, so the dependency on config runs one way."""
    code = "import sys, ivmstream.service; sys.exit('ivmstream.config' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


def test_dead_letters_fit_the_producers_message_size_limit() -> None:
    """The worker producer's message.max.bytes leaves room over the largest dead letter's value; a
    configured limit that does not is refused in one line naming both settings."""
    from ivmstream.config import DEAD_LETTER_HEADROOM, PRODUCER_MESSAGE_MAX_BYTES, producer_message_max_bytes

    service = load_service("reference")
    default = build_config(service, {})
    assert default.dead_letter_max_bytes + DEAD_LETTER_HEADROOM <= PRODUCER_MESSAGE_MAX_BYTES
    assert (
        producer_message_max_bytes(default.dead_letter_max_bytes, default.kafka) == PRODUCER_MESSAGE_MAX_BYTES
    )
    big = build_config(service, {"dead_letter_max_bytes": 4_000_000})
    assert (
        producer_message_max_bytes(big.dead_letter_max_bytes, big.kafka) == 4_000_000 + DEAD_LETTER_HEADROOM
    )
    given = {"message.max.bytes": 2_000_000}
    fits = build_config(service, {"dead_letter_max_bytes": 1_500_000, "kafka": {"producer": given}})
    assert producer_message_max_bytes(fits.dead_letter_max_bytes, fits.kafka) == 2_000_000
    with pytest.raises(ConfigError, match="dead_letter_max_bytes 1990000 leaves no room") as caught:
        build_config(service, {"dead_letter_max_bytes": 1_990_000, "kafka": {"producer": given}})
    assert "\n" not in str(caught.value) and "message.max.bytes 2000000" in str(caught.value)
    with pytest.raises(ConfigError, match="must be an integer"):
        build_config(service, {"kafka": {"producer": {"message.max.bytes": "lots"}}})
    with pytest.raises(ConfigError, match="dead_letter_max_bytes"):
        build_config(service, {"dead_letter_max_bytes": 0})
