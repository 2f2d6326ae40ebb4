"""An earlier commit of ivmstream made importable beside the checkout, so a benchmark can run both in the
same session: ``git archive`` of the commit into a directory (outside the repository), its C extensions
compiled in place with the running Python's headers, and a path entry whose ``ivmstream`` is the
commit's ``shared/`` with its ``services/`` linked in, as setup.py's folder mapping installs them.

    PYTHONPATH=<dir>/path python -c "import ivmstream"   # the commit's code
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from bench.lib.report import REPO


def build_baseline(commit: str, directory: Path) -> Path:
    """The ``PYTHONPATH`` entry of ``commit``'s code under ``directory`` (built once, reused after)."""
    tree, path = directory / "tree", directory / "path"
    marker = directory / "commit"
    sha = subprocess.run(
        ["git", "rev-parse", commit], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    if marker.exists() and marker.read_text() == sha:
        return path
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", sha], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    path.mkdir(exist_ok=True)
    (path / "ivmstream").unlink(missing_ok=True)
    (path / "ivmstream").symlink_to(tree / "shared")
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    for source in [*(tree / "shared").rglob("*.c"), *(tree / "services").rglob("*.c")]:
        subprocess.run(
            [
                "gcc",
                "-shared",
                "-fPIC",
                "-O2",
                f"-I{include}",
                str(source),
                "-o",
                str(source.with_suffix(suffix)),
            ],
            check=True,
        )
    (tree / "shared" / "services").unlink(missing_ok=True)
    (tree / "shared" / "services").symlink_to(tree / "services")
    marker.write_text(sha)
    return path


if __name__ == "__main__":
    print(build_baseline(sys.argv[1], Path(sys.argv[2])))
