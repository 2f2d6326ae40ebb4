"""A machine without a C compiler installs ivmstream without its extensions (setup.py declares each one
optional): every module that imports an extension must then fall back to its Python form. A child
process refuses every extension setup.py declares, imports each module that imports one, and runs the
reference engine's batch update and a checkpoint's staging on those Python forms."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import REPO

from bench.lib.baseline_tree import declared_extensions

CHILD = """
import importlib, importlib.abc, sys

BLOCKED = set(sys.argv[1].split(","))

class NoExtensions(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not built)", name=name)
        return None

sys.meta_path.insert(0, NoExtensions())
for module in sys.argv[2].split(","):
    importlib.import_module(module)
assert not BLOCKED & set(sys.modules)

from decimal import Decimal
from ivmstream.services.reference import bag_rows
from ivmstream.services.reference.engine import kernel_precision
from ivmstream.state import staging

assert bag_rows.bag_rows is bag_rows.py_bag_rows and staging.stage_entries is staging.py_stage_entries
dirty, clean = {}, {}
out = bag_rows.bag_rows("r", [["a", "a", "b"], ["1.5", "1.50", "2"]], b"\\x00\\x01", [1, 1, -1], dirty, clean,
                        True, [1], [Decimal(0)], kernel_precision(), Decimal)
assert out[0] == [] and out[1] == 3 and str(out[5][0]) == "1.00", out
assert sorted(dirty.values()) == [-1, 2], dirty
calls = []
changes = [("m", b"b", b"1"), ("m", b"a", b"2")]
staging.stage_entries(lambda k, v: calls.append(k), calls.append, b"e:", changes)
assert calls == [b"e:m\\x00a", b"e:m\\x00b"], calls
print("ok")
"""


def modules_importing(extensions: list[str]) -> list[str]:
    """Each package module whose source imports one of the extensions (by its last name)."""
    last = "|".join(sorted({re.escape(name.rsplit(".", 1)[1]) for name in extensions}))
    pattern = re.compile(
        rf"^\s*(from\s+\S*\s+)?import\s+.*\b({last})\b|^\s*from\s+\S*\.({last})\s+import", re.M
    )
    out = []
    for folder, package in (("shared", "ivmstream"), ("services", "ivmstream.services")):
        for path in sorted((REPO / folder).rglob("*.py")):
            if pattern.search(path.read_text()):
                parts = path.relative_to(REPO / folder).with_suffix("").parts
                out.append(".".join((package, *parts)).removesuffix(".__init__"))
    return out


def test_every_extension_has_a_python_fallback() -> None:
    _folders, extensions = declared_extensions(REPO)
    names = [name for name, _sources in extensions]
    importers = modules_importing(names)
    assert len(importers) >= len(names)  # every extension has a module that imports it
    run = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(names), ",".join(importers)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
