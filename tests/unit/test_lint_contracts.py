"""The import contracts ``make lint`` checks catch the violations they are written for.

Each case copies the package's sources to a temporary folder (laid out as installed: ``shared/`` as
``ivmstream/``, ``services/`` as ``ivmstream/services/``), adds one offending import and runs
``lint-imports`` with the repository's own contract on the copy: the contract must break there and
name the offending import, and the same contract run on an unchanged copy must not name it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import importlinter  # noqa: F401  (the dev extra installs it; without it `make lint` cannot run either)
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (contract id, module file to change, the import to add, a line the broken contract's report holds)
VIOLATIONS = [
    (
        "engines-pure",
        "services/reference/engine.py",
        "import redis",
        "ivmstream.services.reference.engine -> redis",
    ),
    # reached only through the engine, so the contract covers the pure modules an engine imports
    (
        "engines-pure",
        "services/triangles/thresholds.py",
        "import ivmstream.state",
        "ivmstream.services.triangles.thresholds -> ivmstream.state",
    ),
    (
        "engines-pure",
        "services/vwap/options.py",
        "import pyspark.sql",
        "ivmstream.services.vwap.options -> pyspark",
    ),
    (
        "platform-without-services",
        "shared/verdict.py",
        "import ivmstream.services.reference.engine",
        "ivmstream.verdict ->",
    ),
    (
        "runtime-without-dev",
        "shared/state/memory.py",
        "import ivmstream.dev.broker",
        "ivmstream.state.memory ->",
    ),
    (
        "config-layers",
        "shared/options.py",
        "import ivmstream.service",
        "ivmstream.options -> ivmstream.service",
    ),
    ("acyclic", "shared/verdict.py", "import ivmstream.cli", "No cycles are allowed in ivmstream.\n"),
    (
        "services-through-sdk",
        "services/reference/engine.py",
        "from ivmstream.engine import Rejection as _R",
        "ivmstream.services.reference.engine -> ivmstream.engine",
    ),
    # an algorithm module, and a platform module the SDK does not re-export
    (
        "services-through-sdk",
        "services/vwap/trees/index.py",
        "import ivmstream.runtime.kafka",
        "ivmstream.services.vwap.trees.index -> ivmstream.runtime.kafka",
    ),
]


def installed(tree: Path, path: str) -> Path:
    """Where the repository file ``path`` lies in a copy laid out as installed."""
    folder, _, rest = path.partition("/")
    return tree / "ivmstream" / rest if folder == "shared" else tree / "ivmstream" / "services" / rest


def _copy_sources(dest: Path) -> None:
    """The Python sources of the package (no data files, no build products) and the contracts."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            n for n in names if n == "__pycache__" or (not n.endswith(".py") and not Path(folder, n).is_dir())
        ]

    shutil.copytree(ROOT / "shared", dest / "ivmstream", ignore=ignore)
    shutil.copytree(ROOT / "services", dest / "ivmstream" / "services", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")


def lint(tree: Path, contract: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` of one contract on ``tree`` (whose packages come first on the import path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--contract", contract],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("pristine")
    _copy_sources(tree)
    return tree


@pytest.fixture(scope="module")
def clean_reports(pristine: Path) -> dict[str, str]:
    """Each contract's report on the unchanged copy, run once per contract."""
    return {contract: lint(pristine, contract).stdout for contract in {v[0] for v in VIOLATIONS}}


def test_the_copy_is_what_lint_imports_reads(pristine: Path) -> None:
    """Guards the cases below: a report about the copy, not about the installed checkout."""
    probe = installed(pristine, "shared/verdict.py")
    original = probe.read_text()
    probe.write_text(original + "\nimport ivmstream.services.reference\n")
    try:
        out = lint(pristine, "platform-without-services")
    finally:
        probe.write_text(original)
    assert out.returncode != 0 and "ivmstream.verdict -> ivmstream.services.reference" in out.stdout, (
        out.stdout
    )


def _contract(contract_id: str) -> dict[str, Any]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (found,) = [c for c in contracts if c["id"] == contract_id]
    return found


def _platform_modules() -> set[str]:
    """The top-level modules and packages of ivmstream that shared/ holds."""
    return {
        f"ivmstream.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "shared").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").is_file())
    }


def test_platform_contract_names_every_platform_module() -> None:
    """The contract lists the platform's modules one by one (import-linter cannot say "ivmstream but
    not ivmstream.services"), so a module added to shared/ must be added there too."""
    assert set(_contract("platform-without-services")["source_modules"]) == _platform_modules()


def test_sdk_contract_forbids_every_platform_module_but_the_sdk() -> None:
    """Likewise a module added to shared/ is internal, so services may not import it, until the SDK
    re-exports what they need from it."""
    contract = _contract("services-through-sdk")
    assert set(contract["forbidden_modules"]) == _platform_modules() - {"ivmstream.sdk"}


@pytest.mark.parametrize(("contract", "path", "statement", "report"), VIOLATIONS)
def test_contract_breaks_on_its_violation(
    clean_reports: dict[str, str], tmp_path: Path, contract: str, path: str, statement: str, report: str
) -> None:
    assert report not in clean_reports[contract], clean_reports[contract]
    tree = tmp_path / "tree"
    _copy_sources(tree)
    target = installed(tree, path)
    target.write_text(target.read_text() + f"\n{statement}  # the violation under test\n")
    broken = lint(tree, contract)
    assert broken.returncode != 0, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout and report in broken.stdout, broken.stdout
