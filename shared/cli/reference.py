"""The references generated from the code: docs/configuration.md from the option declarations (every
runtime key and every key of each service, with its default, what it accepts and what it means), and
docs/reasons.md from the reason registries (every code a dead letter or a rejected line can carry).
Tests compare the pages with ``render()`` and ``render_reasons()``; ``python -m ivmstream.cli.reference
> docs/configuration.md`` and ``python -m ivmstream.cli.reference --reasons > docs/reasons.md`` rewrite
them."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import orjson

from ivmstream.config import RUNTIME_OPTIONS
from ivmstream.events.reasons import CHANGE_REASONS, REASONS, RUNTIME_REASONS
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
    if service.emit != "batch":
        lines += [f"Its results are published with `emit: {service.emit}` unless the config sets `emit`.", ""]
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


REASONS_HEADER = """# Reason codes

Every refused record goes to its service's dead-letter topic (`<service>.dlq`) with a reason code in
its `ivmstream.reason` header, is counted under that code in `ivmstream_events_rejected_total`, and is
listed by `ivmstream dlq`; `replay` and `produce` print the same code for a line they reject. The codes
are stable: an alert or a dashboard may name them. `docs/security.md` says how each hostile kind is
detected; `docs/change-data.md` what a change record must hold.

This page is generated from the reason registries (`python -m ivmstream.cli.reference --reasons >
docs/reasons.md`); `tests/unit/test_reason_codes_documented.py` fails when it is out of date or when
the code emits a reason no registry names.
"""


def reasons_table(reasons: Mapping[str, str]) -> list[str]:
    rows = ["| code | meaning |", "|---|---|"]
    rows += [f"| `{code}` | {_cell(meaning)} |" for code, meaning in sorted(reasons.items())]
    return [*rows, ""]


def render_reasons() -> str:
    """The reason-code page: the decoder's, the change formats', the runtime's, then each service's."""
    lines = [REASONS_HEADER, "## Every service: decoding the native event", ""]
    lines += reasons_table(REASONS)
    lines += ["## Every service: change records (`inputs` in a change format)", ""]
    lines += reasons_table(CHANGE_REASONS)
    lines += ["## Every service: where an event arrives", ""]
    lines += reasons_table(RUNTIME_REASONS)
    for name in sorted(available_services()):
        service = load_service(name)
        lines += [f"## {name}: its engine", ""]
        lines += reasons_table(service.reasons) if service.reasons else ["It refuses no decoded event.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_reasons() if sys.argv[1:] == ["--reasons"] else render())
