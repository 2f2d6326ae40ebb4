"""docs/configuration.md is written from the option declarations and names every key the config parser
accepts, runtime and per service, with its default; the README points to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ivmstream.cli.reference import render
from ivmstream.config import ConfigError, build_config
from ivmstream.service import available_services, load_service

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "configuration.md"
SERVICES = sorted(available_services())


def test_the_page_is_what_the_declarations_give():
    assert PAGE.read_text() == render(), (
        "regenerate: python -m ivmstream.cli.reference > docs/configuration.md"
    )


def _sections() -> dict[str, str]:
    parts = re.split(r"^## ", PAGE.read_text(), flags=re.MULTILINE)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


def _accepted_keys(name: str) -> list[str]:
    """The keys the config parser accepts for the service, as its refusal of an unknown key lists them."""
    with pytest.raises(ConfigError) as info:
        build_config(load_service(name), {"no such key": 1})
    known = re.search(r"\(known: (.*)\)$", str(info.value))
    assert known is not None, str(info.value)
    return known.group(1).split(", ")


@pytest.mark.parametrize("name", SERVICES)
def test_every_key_the_parser_accepts_is_documented_with_its_default(name):
    sections = _sections()
    runtime, own = sections["Runtime keys (every service)"], sections[name]
    rows = {
        m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| (`[^|]*`) \|", runtime + own, re.M)
    }
    missing = [key for key in _accepted_keys(name) if key not in rows]
    assert not missing, f"keys of {name} missing from docs/configuration.md: {missing}"


def test_the_readme_points_to_the_reference():
    assert "docs/configuration.md" in (REPO / "README.md").read_text()
