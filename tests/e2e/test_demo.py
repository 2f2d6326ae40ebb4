"""`ivmstream demo` runs the whole stack, verifies the views and cleans up every process it started."""

from __future__ import annotations

import subprocess

import pytest
from helpers import ivm

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out


def _children_named(pattern: str) -> set[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_demo_passes_and_cleans_up():
    before = _children_named("ivmstream-demo-") | _children_named("demo.reference")
    proc = ivm("demo", timeout=300)
    verdicts = [line for line in proc.stdout.splitlines() if "stream vs offline replay" in line]
    reconciled = [line for line in proc.stdout.splitlines() if line.strip().startswith("reconcile ")]
    assert verdicts and all(line.endswith("MATCH") for line in verdicts), proc.stdout
    assert any("triangles: stream vs offline replay" in line for line in verdicts)
    assert reconciled and all(": MATCH on " in line for line in reconciled), proc.stdout
    assert proc.stdout.rstrip().endswith("demo passed: every view matches its independent recomputation")
    assert "Traceback" not in proc.stderr
    after = _children_named("ivmstream-demo-") | _children_named("demo.reference")
    assert after <= before  # no worker, broker or redis-server left behind
