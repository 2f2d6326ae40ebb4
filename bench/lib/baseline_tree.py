"""An earlier commit of ivmstream made importable beside the checkout, so a benchmark can run both in the
same session: ``git archive`` of the commit into a directory (outside the repository), its C extensions
(as its setup.py declares them, each from all its sources) compiled in place with the running Python's
headers, and a path entry whose ``ivmstream`` is the
commit's ``shared/`` with its ``services/`` linked in, as setup.py's folder mapping installs them.

    PYTHONPATH=<dir>/path python -c "import ivmstream"   # the commit's code
"""

from __future__ import annotations

import json
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
    folders, extensions = declared_extensions(tree)
    for name, sources in extensions:
        package = max((p for p in folders if name.startswith(p + ".")), key=len)
        target = tree / folders[package] / name[len(package) + 1 :].replace(".", "/")
        output = str(target.with_name(target.name + suffix))
        gcc = ["gcc", "-shared", "-fPIC", "-O2", f"-I{include}", *(str(tree / s) for s in sources)]
        subprocess.run([*gcc, "-o", output], check=True)
    (tree / "shared" / "services").unlink(missing_ok=True)
    (tree / "shared" / "services").symlink_to(tree / "services")
    marker.write_text(sha)
    return path


# Run in the tree: its setup.py with setup() replaced by a recorder of the folders and the extensions.
_DECLARED = """
import json, setuptools
seen = {}
setuptools.setup = lambda **kw: seen.update(kw)
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__"})
print(json.dumps([seen["package_dir"], [(e.name, e.sources) for e in seen.get("ext_modules", [])]]))
"""


def declared_extensions(tree: Path) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """The commit's package folders and C extensions (module name, its sources), as its setup.py says:
    an extension of several sources (with a shared header) is one module built from all of them."""
    out = subprocess.run(
        [sys.executable, "-c", _DECLARED], cwd=tree, capture_output=True, text=True, check=True
    ).stdout
    folders, extensions = json.loads(out.splitlines()[-1])
    return folders, [(name, sources) for name, sources in extensions]


if __name__ == "__main__":
    print(build_baseline(sys.argv[1], Path(sys.argv[2])))
