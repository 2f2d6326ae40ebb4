"""A new service is one folder: a copy of services/reference under another name, kept outside the
repository as a package of its own and registered under the ``ivmstream.services`` entry-point group
(as another distribution would register it), is found by name and passes the conformance suite, with no
edit at all. (A copy inside services/: test_template_copy.py.) The suite's kill -9 restarts (marked slow)
are left to the template's own run, ``reference/demo``: they restart the same worker command on the same
code, which the copy's stream-equals-replay run already starts by the new name."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).with_name("test_conformance.py")
NEW = "copied_bags"


def copy_reference_as(root: Path, name: str) -> Path:
    """``root/<name>``: services/reference as a top-level package, unchanged (its modules import each
    other relatively and its name is its folder's), and ``root/<name>-0.dist-info`` registering it as a
    distribution installed there would."""
    target = root / name
    shutil.copytree(REPO / "services" / "reference", target, ignore=shutil.ignore_patterns("__pycache__"))
    metadata = root / f"{name}-0.dist-info"
    metadata.mkdir()
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0\n")
    (metadata / "entry_points.txt").write_text(f"[ivmstream.services]\n{name} = {name}.service:SERVICE\n")
    return target


def environment(extra: Path) -> dict[str, str]:
    """The extra directory on the path, as a site-packages holding the other distribution."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(extra), *filter(None, [env.get("PYTHONPATH")])])
    return env


def suite_checks() -> set[str]:
    """The conformance tests that run once per (service, workload), but for those marked slow."""
    spec = importlib.util.spec_from_file_location("conformance_suite", SUITE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {
        name
        for name, fn in vars(module).items()
        if name.startswith("test_")
        and inspect.isfunction(fn)
        and "case" in inspect.signature(fn).parameters
        and not any(mark.name == "slow" for mark in getattr(fn, "pytestmark", []))
    }


def test_copied_service_folder_is_found_without_other_edits(tmp_path):
    extra = tmp_path / "elsewhere"
    copy_reference_as(extra, NEW)
    probe = "import json; from ivmstream.service import available_services as a; print(json.dumps(a()))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environment(extra), check=True
    )
    found = json.loads(out.stdout)
    assert found[NEW] == f"{NEW}.service:SERVICE"
    assert {"reference", "triangles", "vwap"} <= found.keys()  # the project's own folders are still seen


@pytest.mark.slow
def test_copied_service_folder_passes_the_conformance_suite(tmp_path):
    extra = tmp_path / "elsewhere"
    copy_reference_as(extra, NEW)
    report = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(SUITE),
            "-k",
            NEW,
            "-m",
            "not slow",
            "--basetemp",
            str(tmp_path / "child"),
            "--junitxml",
            str(report),
        ],
        capture_output=True,
        text=True,
        env=environment(extra),
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    ran: dict[str, list[str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name, _, param = case.get("name", "").partition("[")
        outcome = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        ran.setdefault(param.rstrip("]"), []).append(name)
        assert not outcome, (case.get("name"), outcome)
    assert set(ran) == {f"{NEW}/demo"}, ran
    assert set(ran[f"{NEW}/demo"]) == suite_checks()
