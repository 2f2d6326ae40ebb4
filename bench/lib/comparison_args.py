"""The options every comparison of ivmstream's kernels takes (``bench/native_*.py`` against the authors'
C++, ``bench/triangles_kernels.py`` against the Python steps): ``--quick``, ``--markdown [JSON]``,
``--repeats``, ``--out``, the child processes' hidden ``--child``, and ``--cpp`` with the environment
variable that stands in for it. Each script adds its own sizes."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def comparison_parser(
    doc: str, out: Path, *, cpp_env: str | None = None, cpp_help: str = "", child: bool = True
) -> argparse.ArgumentParser:
    """The parser, described by the first paragraph of the script's docstring; ``--markdown`` alone
    prints the docs' table from ``out``. ``cpp_env``: the script compares with a C++ binary."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke sizes (seconds)")
    p.add_argument("--markdown", nargs="?", const=str(out), default=None, metavar="JSON")
    if cpp_env is not None:
        p.add_argument("--cpp", type=Path, default=None, help=f"{cpp_help} (default: ${cpp_env})")
    p.add_argument("--repeats", type=int, default=None, help="interleaved repeats (3)")
    p.add_argument("--out", type=Path, default=None)
    if child:
        p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def comparison_defaults(a: argparse.Namespace, cpp_env: str | None = None) -> argparse.Namespace:
    """The repeats (1 with ``--quick``, else 3) and the C++ binary from ``cpp_env`` where not given."""
    a.repeats = a.repeats or (1 if a.quick else 3)
    if cpp_env is not None and a.cpp is None and os.environ.get(cpp_env):
        a.cpp = Path(os.environ[cpp_env])
    return a
