"""The Makefile's set-up split: `make demo` installs the runtime and what the demo needs, never the tool
chain only the tests use; `make test` and the other development targets install that tool chain too.
Read from `make -n` into a fresh virtualenv path, so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

DEV_ONLY = ("dev-requirements.txt", "checkov", "prometheus", "[dev")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def planned(target: str, venv: Path) -> str:
    """The commands `make TARGET` would run into a virtualenv that does not exist yet."""
    proc = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_demo_installs_the_package_without_the_development_tools(tmp_path: Path) -> None:
    plan = planned("demo", tmp_path / "venv")
    assert "pip install -q -e . --config-settings editable_mode=strict" in plan
    assert "redis-server" in plan and "openjdk" in plan
    assert not [word for word in DEV_ONLY if word in plan]


@pytest.mark.parametrize("target", ["test", "test-fast", "lint", "bench", "fuzz", "chaos"])
def test_development_targets_install_the_tool_chain(target: str, tmp_path: Path) -> None:
    plan = planned(target, tmp_path / "venv")
    assert "pip install -q -e . --config-settings editable_mode=strict" in plan
    assert all(word in plan for word in DEV_ONLY[:3])


def test_every_c_source_and_header_is_built_and_rebuilds_the_install(tmp_path: Path) -> None:
    """A C file left out of setup.py is not compiled (or, a header, not a rebuild trigger), and one left out
    of the install stamp's prerequisites leaves `make setup` on a stale extension after it changes."""
    tracked = subprocess.run(
        ["git", "ls-files", "shared/*.[ch]", "services/*.[ch]"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked
    setup = (REPO / "setup.py").read_text()
    assert [f for f in tracked if f'"{f}"' not in setup] == []
    venv = tmp_path / "venv"
    database = subprocess.run(
        ["make", "-npq", f"VENV={venv}", "lint"], cwd=REPO, capture_output=True, text=True, timeout=60
    ).stdout
    [rule] = [line for line in database.splitlines() if line.startswith(f"{venv}/.installed-stamp:")]
    prerequisites = set(rule.split(":", 1)[1].split())
    assert [f for f in tracked if f not in prerequisites] == []


def test_lint_compares_every_stub_with_its_built_module(tmp_path: Path) -> None:
    """A compiled module's stub that stubtest does not read can drift from its C type unseen: `make lint`
    runs stubtest on the module of every tracked .pyi, and each allowlist entry comes after the comment
    that gives its reason."""
    stubs = subprocess.run(
        ["git", "ls-files", "*.pyi"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert stubs
    names = {"shared": "ivmstream", "services": "ivmstream.services"}
    expected = {
        ".".join([names[top], *rest]).removesuffix(".pyi")
        for top, *rest in (stub.split("/") for stub in stubs)
    }
    plan = planned("lint", tmp_path / "venv")
    [run] = [line.split() for line in plan.splitlines() if "/bin/stubtest " in line]
    assert run[run.index("--allowlist") + 1] == "stubtest-allowlist.txt"
    assert expected <= set(run)
    lines = [line.strip() for line in (REPO / "stubtest-allowlist.txt").read_text().splitlines()]
    entries = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    assert all(i > 0 and lines[i - 1].startswith("#") for i in entries)
