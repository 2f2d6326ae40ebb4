"""The configuration reference, docs/configuration.md, written from the option declarations: every
runtime key and every key of each service, with its default, what it accepts and what it means. A test
compares the page with ``render()``; ``python -m ivmstream.cli.reference > docs/configuration.md``
rewrites it."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import orjson

from ivmstream.config import RUNTIME_OPTIONS
from ivmstream.options import Option, expects_of
from ivmstream.service import ServiceDefinition, available_services, load_service

HEADER = """# Configuration reference

A service instance is configured by one flat mapping, in a YAML or JSON file given with `--config`
(`ivmstream run`, `replay`, `produce`, `results`, `dlq`, `bootstrap`, `reconcile`): the runtime keys
below, which every service takes, plus the keys of the service. Every key is optional unless its
meaning says it is required; a key left out takes its default, so without `--config` a service runs
on its defaults. A key the service does not know, or a value its parser refuses, is an error that
names the key.

```yaml
# triangles.yaml: graph mode, results every event, the dead letters' values cut at 64 KiB
mode: graph
emit: every-event
dead_letter_max_bytes: 65536
```

Relations are declared one way in every service that takes them, `{relation: {column: type}}`; the
types and shorthands are described under each service's `relations` key.

This page is generated from the option declarations (`python -m ivmstream.cli.reference >
docs/configuration.md`); `tests/unit/test_config_reference.py` fails when it is out of date.
"""


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, on one line."""
    return " ".join(text.split()).replace("|", "\\|")


def _default(value: Any) -> str:
    return "`" + orjson.dumps(value, default=str).decode().replace("|", "\\|") + "`"


def _accepts(opt: Option) -> str:
    """What the key's parser accepts; a plain function's parser says it in the key's meaning."""
    return _cell(expects_of(opt.parse).replace("a valid value", "(see meaning)"))


def options_table(options: Mapping[str, Option]) -> list[str]:
    """One row per key: name, default, what it accepts, meaning."""
    rows = ["| key | default | accepts | meaning |", "|---|---|---|---|"]
    for key in sorted(options):
        opt = options[key]
        rows.append(f"| `{key}` | {_default(opt.default)} | {_accepts(opt)} | {_cell(opt.help)} |")
    return rows


def service_section(service: ServiceDefinition) -> list[str]:
    lines = [f"## {service.name}", "", f"{service.summary}.", ""]
    if "relations" not in service.options:
        lines += ["Its relations are fixed:", ""]
        lines += [f"- {line}" for line in service.relations_help()]
        lines.append("")
    if service.options:
        lines += options_table(service.options)
    else:
        lines.append("It has no keys of its own.")
    return [*lines, ""]


def render() -> str:
    """The whole page."""
    lines = [HEADER, "## Runtime keys (every service)", ""]
    lines += [*options_table(RUNTIME_OPTIONS), ""]
    for name in sorted(available_services()):
        lines += service_section(load_service(name))
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
