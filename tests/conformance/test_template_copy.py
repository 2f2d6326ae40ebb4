"""docs/adding-a-service.md, followed literally: in a temporary copy of the repository, services/reference
copied under a new name with no edit anywhere, then ``python -m deploy``, gives a service that the CLI
knows, the deployment artifacts include (and the staleness check accepts), the conformance suite runs
and passes, and the demo chooses with its workload and Spark jobs taken from the copy.

The copy's code is the template's, byte for byte: what only runs the template's code again is left to
the repository's own runs of it (the kill -9 restarts of ``reference/demo`` in
tests/conformance/test_conformance.py, its Spark reconciliation in tests/integration/test_spark_jobs.py,
the demo's orchestration in tests/e2e/test_demo.py). Here the copy is run where its new name is what
is looked up: the CLI, the generators, the conformance suite's worker on the real broker.

The copy is imported as installed: a site folder maps its ``shared/`` onto ``ivmstream`` and its
``services/`` onto ``ivmstream.services`` by symbolic links, as the editable install's link tree does,
and comes first on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
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
    """Every check but the kill -9 restarts (the template's code under test again, see above): the cut-point
    restores, determinism, refusals, and ``ivmstream run`` of the copy's demo workload on a real broker
    publishing what the replay computes, as the demo's worker does."""
    repo, env = copied
    suite = _run(
        repo,
        env,
        "-m",
        "pytest",
        "-v",
        "-p",
        "no:cacheprovider",
        "tests/conformance/test_conformance.py",
        "-k",
        NEW,
        "-m",
        "not slow",
        timeout=900,
    )
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout and " skipped" not in suite.stdout, suite.stdout[-2000:]
    assert f"test_stream_equals_replay[{NEW}/demo] PASSED" in suite.stdout, suite.stdout[-2000:]


DEMO_PROBE = """
import importlib, json
from ivmstream.dev.demo import _services
chosen = {s.name: s for s in _services(None)}
svc = chosen.get("%s")
module, _, attribute = svc.batch.partition(":") if svc else ("", "", "")
jobs = importlib.import_module(module) if svc else None
print(json.dumps({
    "chosen": sorted(chosen),
    "input": str(svc.demo.input) if svc else None,
    "batch_file": jobs.__file__ if jobs else None,
    "has_jobs": hasattr(jobs, attribute),
}))
"""


def test_the_demo_chooses_the_copy_with_its_workload_and_spark_jobs(
    copied: tuple[Path, dict[str, str]],
) -> None:
    """What ``ivmstream demo`` looks up by the copy's name: the service, its demo workload's input and the
    Spark jobs its reconciliation runs, all from the copy."""
    repo, env = copied
    probe = _run(repo, env, "-c", DEMO_PROBE % NEW)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert NEW in found["chosen"], found
    copy = (repo / "services" / NEW).resolve()
    assert Path(found["input"]).resolve().is_relative_to(copy), found
    assert Path(found["batch_file"]).resolve().is_relative_to(copy) and found["has_jobs"], found
