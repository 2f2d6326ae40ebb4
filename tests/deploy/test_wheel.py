"""The built distribution installs one import package, ``ivmstream``, typed, with the services and
their data under it (setup.py maps shared/ and services/ onto it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """A wheel built from a copy of the tracked files (the build writes nothing into the checkout)."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    for name in tracked.stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), "."],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("ivmstream-*.whl")
    return zipfile.ZipFile(built)


def test_one_top_level_package(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"ivmstream"}
    top_level = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    if top_level:  # written by older setuptools only
        assert wheel.read(top_level[0]).decode().split() == ["ivmstream"]


def test_typed_with_stubs_for_the_compiled_modules(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "ivmstream/py.typed" in names
    assert {
        "ivmstream/events/_fastjson.pyi",
        "ivmstream/runtime/_deadletters.pyi",
        "ivmstream/state/_staging.pyi",
        "ivmstream/_backed_map.pyi",
        "ivmstream/services/triangles/_kernels.pyi",
        "ivmstream/services/triangles/_graph_kernels.pyi",
        "ivmstream/services/reservoir/_kernels.pyi",
        "ivmstream/services/reservoir/_exact_kernels.pyi",
        "ivmstream/services/vwap/_kernels.pyi",
        "ivmstream/services/fivm/_kernels.pyi",
        "ivmstream/services/reference/_kernels.pyi",
    } <= names


def test_services_and_their_data_under_the_package(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for service in ("fivm", "reference", "reservoir", "sketches", "triangles", "vwap"):
        assert f"ivmstream/services/{service}/service.py" in names
    tracked = subprocess.run(
        ["git", "ls-files", "services/*/data/*"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "the services bundle sample data"
    assert {f"ivmstream/{name}" for name in tracked} <= names
    entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert wheel.read(entry_points[0]).decode().count("ivmstream = ivmstream.cli:main") == 1
