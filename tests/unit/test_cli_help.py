"""The command's help is complete: every flag of every subcommand says what it does, every SERVICE
argument lists the services, and the listing below it gives each service's relations."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from ivmstream.cli import build_parser
from ivmstream.service import available_services, load_service

SERVICES = sorted(available_services())


def _parsers(
    parser: argparse.ArgumentParser, prog: str = "ivmstream"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def test_every_flag_has_help_and_every_service_argument_lists_the_services():
    missing, unlisted = [], []
    for prog, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            name = f"{prog} {'/'.join(action.option_strings) or action.dest}"
            if not action.help:
                missing.append(name)
            if action.metavar == "SERVICE" and not all(s in action.help for s in SERVICES):
                unlisted.append(name)
    assert not missing, f"flags without help: {missing}"
    assert not unlisted, f"SERVICE arguments not listing every service: {unlisted}"


def test_help_lists_each_service_with_its_relations():
    parsers = dict(_parsers(build_parser()))
    text = parsers["ivmstream replay"].format_help()
    for name in SERVICES:
        service = load_service(name)
        assert f"  {name}: {service.summary}" in text
    assert "mode graph: {edges: {src: int, dst: int}}" in text  # triangles' fixed relations
    assert "docs/configuration.md" in text


def test_log_level_and_broker_help_say_what_they_take():
    parsers = dict(_parsers(build_parser()))
    assert "DEBUG, INFO, WARNING, ERROR" in parsers["ivmstream"].format_help()
    broker = " ".join(parsers["ivmstream broker"].format_help().split())
    assert "The first line on stdout is its bootstrap address" in broker
    assert "stdin takes 'create NAME N'" in broker
    assert "Without --topic it creates every service's topics" in broker
