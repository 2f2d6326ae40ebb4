"""docs/adding-a-service.md, followed literally: in a temporary copy of the repository, services/reference
copied under a new name with no edit anywhere, then ``python -m deploy``, gives a service that the CLI
knows, the deployment artifacts include (and the staleness check accepts), the conformance suite runs
and passes, and the demo runs.

The copy is imported as installed: a site folder maps its ``shared/`` onto ``ivmstream`` and its
``services/`` onto ``ivmstream.services`` by symbolic links, as the editable install's link tree does,
and comes first on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NEW = "tallies"


def _copy_repository(dest: Path) -> None:
    """The files git knows or would add (committed or not), and the compiled extensions."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    files = [Path(p) for p in listed.split("\0") if p]
    files += [p.relative_to(REPO) for p in (REPO / "shared").rglob("*.so")]
    for rel in files:
        source = REPO / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)


def _site(repo: Path, site: Path) -> None:
    """``site/ivmstream``: each entry of ``repo/shared`` linked in, and ``services`` linked to
    ``repo/services``."""
    package = site / "ivmstream"
    package.mkdir(parents=True)
    for entry in (repo / "shared").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "services").symlink_to(repo / "services")


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("template-copy")
    repo, site = root / "repo", root / "site"
    _copy_repository(repo)
    shutil.copytree(repo / "services" / "reference", repo / "services" / NEW)  # the guide's one step
    _site(repo, site)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(repo)])}
    env.pop("PYTEST_ADDOPTS", None)
    return repo, env


def _run(
    repo: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_copy_is_what_python_imports(copied: tuple[Path, dict[str, str]]) -> None:
    repo, env = copied
    probe = "import ivmstream.services, sys; print(next(iter(ivmstream.services.__path__)))"
    out = _run(repo, env, "-c", probe)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).resolve() == (repo / "services").resolve()


def test_the_cli_knows_the_copy(copied: tuple[Path, dict[str, str]]) -> None:
    repo, env = copied
    config = repo / "tallies.json"
    config.write_text('{"key_field": "store"}')
    unknown = _run(
        repo, env, "-m", "ivmstream.cli", "replay", "no-such", "--config", str(config), "--input", "x"
    )
    assert unknown.returncode != 0 and NEW in unknown.stderr, unknown.stderr  # listed among the available
    sample = repo / "services" / NEW / "data" / "sample.jsonl"
    replay = _run(
        repo, env, "-m", "ivmstream.cli", "replay", NEW, "--config", str(config), "--input", str(sample)
    )
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert '"fingerprint"' in replay.stdout


def test_the_generate_command_puts_the_copy_in_every_artifact(copied: tuple[Path, dict[str, str]]) -> None:
    repo, env = copied
    stale = _run(repo, env, "-m", "deploy", "--check")
    assert stale.returncode == 1 and "stale:" in stale.stdout, stale.stdout  # the staleness check notices
    wrote = _run(repo, env, "-m", "deploy")
    assert wrote.returncode == 0, wrote.stderr[-3000:]
    for path in (
        f"charts/ivmstream/services/{NEW}.yaml",
        f"charts/ivmstream/dashboards/{NEW}.json",
        f"docker/config/{NEW}.yaml",
    ):
        assert (repo / path).is_file(), path
    assert f"{NEW}-worker" in (repo / "docker/compose.yaml").read_text()
    assert f"ivmstream/services/{NEW}/data/sample.jsonl" in (repo / "docker/compose.yaml").read_text()
    assert _run(repo, env, "-m", "deploy", "--check").returncode == 0
    staleness = _run(
        repo,
        env,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/deploy/test_chart.py::test_generated_chart_files_are_current",
        "tests/deploy/test_compose.py::test_generated_files_are_current",
        "tests/deploy/test_dashboards.py::test_generated_dashboards_are_current",
    )
    assert staleness.returncode == 0, staleness.stdout[-3000:]


@pytest.mark.slow
def test_the_conformance_suite_runs_the_copy_and_passes(copied: tuple[Path, dict[str, str]]) -> None:
    repo, env = copied
    suite = _run(
        repo,
        env,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/conformance/test_conformance.py",
        "-k",
        NEW,
        timeout=900,
    )
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout and " skipped" not in suite.stdout, suite.stdout[-2000:]


@pytest.mark.slow
def test_the_demo_runs_the_copy(copied: tuple[Path, dict[str, str]]) -> None:
    repo, env = copied
    chosen = _run(
        repo, env, "-c", "from ivmstream.dev.demo import _services; print([s.name for s in _services(None)])"
    )
    assert chosen.returncode == 0 and f"'{NEW}'" in chosen.stdout, chosen.stdout + chosen.stderr
    demo = _run(repo, env, "-m", "ivmstream.cli", "demo", "--service", NEW, timeout=600)
    assert demo.returncode == 0, demo.stdout[-4000:] + demo.stderr[-2000:]
    assert f"{NEW}: stream vs offline replay" in demo.stdout and "MATCH" in demo.stdout, demo.stdout[-3000:]
