"""Kernel-comparison benchmarks run each variant in a child process of their own script: the compiled
kernels, or the Python loops (``IVMSTREAM_PURE_PYTHON=1``, read when the service's kernels module is
imported, so it cannot change within one process). The child prints one ``RESULT <json>`` line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PURE_PYTHON_ENV = "IVMSTREAM_PURE_PYTHON"
_MARK = "RESULT "


def print_result(result: Mapping[str, Any]) -> None:
    """The child's side: its measurement, as the one line the parent reads."""
    print(_MARK + json.dumps(result), flush=True)


def run_variant(
    script: str,
    args: Sequence[str],
    variant: str,
    label: str,
    cwd: Path,
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``script --child ARGS`` on the ``compiled`` or ``python`` kernels; its result, after checking
    that it ran the kernels it was asked for (a missing build would otherwise time the fallback)."""
    env = {n: v for n, v in os.environ.items() if n != PURE_PYTHON_ENV}
    env.update(extra_env or {})
    if variant == "python":
        env[PURE_PYTHON_ENV] = "1"
    proc = subprocess.run(
        [sys.executable, script, "--child", *args], env=env, capture_output=True, text=True, cwd=cwd
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{label} ({variant}) failed: {proc.stderr[-2000:]}")
    got: dict[str, Any] = json.loads(lines[-1][len(_MARK) :])
    if got["kernels"] != variant:
        raise SystemExit(f"{label}: asked for the {variant} kernels, ran {got['kernels']}")
    return got
