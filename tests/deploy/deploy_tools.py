"""Helpers shared by the deployment tests: the real tools, found where `make setup-dev` installs them."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A command-line tool from this virtualenv, its isolated tool venv, or the system (promtool)."""
    for candidate in (VENV_BIN / name, VENV_BIN.parent / "checkov" / "bin" / name):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    assert found is not None, f"{name} is missing: `make setup-dev` installs it"
    return found


def run_tool(*args: str, cwd: Path = REPO, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=timeout)


def parse_cli(args: Sequence[str]) -> argparse.Namespace:
    """``ivmstream ARGS`` as the CLI's own parser reads them; a flag it does not know fails the test."""
    from ivmstream.cli import build_parser

    try:
        return build_parser().parse_args(list(args))
    except SystemExit as exc:
        raise AssertionError(f"ivmstream {' '.join(args)}: the CLI refuses these arguments") from exc


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), arguments
    return value


def worker_metrics() -> tuple[set[str], set[str]]:
    """Every series name and label name a worker's registry exposes (shared/metrics.py), with each labelled
    family given one child and the reconciliation gauges registered, as a running worker has them."""
    import orjson

    from ivmstream.metrics import RuntimeMetrics

    class _Verdicts:
        def get(self, _key: str) -> bytes:
            return orjson.dumps({"verdict": "match", "checked_at": 1.0, "mismatched_keys": 0, "keys": 3})

    metrics = RuntimeMetrics("svc")
    metrics.reject("bad-json")
    metrics.consumer_lag.labels("svc", "svc.updates", "0").set(1)
    metrics.count_relations({"R": 1})
    metrics.set_engine_stats({"size": 1.0})
    metrics.export_reconcile(_Verdicts(), "key")
    names: set[str] = set()
    labels: set[str] = set()
    for family in metrics.registry.collect():
        for sample in family.samples:
            names.add(sample.name)
            labels.update(sample.labels)
    return names, labels


# PromQL words that are not metric or label names (functions, aggregations, modifiers, Grafana's ranges).
_WORDS = (
    "sum avg min max count topk bottomk by without on ignoring group_left group_right bool and or unless "
    "rate irate increase delta deriv abs time histogram_quantile clamp_min clamp_max offset label_values"
)
PROMQL_WORDS = frozenset(_WORDS.split())
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "${datasource}": "x"}


def promql_identifiers(expr: str) -> set[str]:
    """The names an expression refers to: quoted strings, durations and numbers removed."""
    import re

    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\[[^\]]*\]", "", text)
    return set(re.findall(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", text)) - PROMQL_WORDS


def substitute_grafana(expr: str) -> str:
    """The PromQL Grafana sends: its variables replaced by values of their kind."""
    import re

    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return re.sub(r"\$\{?(\w+)\}?", "x", expr)


def recording_rules() -> dict[str, str]:
    import yaml

    rules = {}
    for path in sorted((REPO / "charts" / "ivmstream" / "rules").glob("*.yaml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    rules[rule["record"]] = rule["expr"]
    return rules


def unknown_names(expr: str) -> set[str]:
    """Names in ``expr`` that are neither a worker's series or label, nor a recording rule whose own
    expression uses only those (recursively)."""
    names, labels = worker_metrics()
    recorded = recording_rules()
    unknown = set()
    for ident in promql_identifiers(expr):
        if ident in names or ident in labels:
            continue
        if ident in recorded:
            unknown |= unknown_names(recorded[ident])
            continue
        unknown.add(ident)
    return unknown


def read_by_the_code(name: str) -> bool:
    """Whether the program reads environment variable ``name``: named in shared/ (a ``NAME_FILE`` variant
    counts when shared/secrets.py reads every credential variable also as a file)."""
    code = "\n".join(p.read_text() for p in (REPO / "shared").rglob("*.py"))
    if f'"{name}"' in code:
        return True
    base = name.removesuffix("_FILE")
    return (
        base != name
        and f'"{base}"' in code
        and 'f"{name}_FILE"' in (REPO / "shared" / "secrets.py").read_text()
    )
