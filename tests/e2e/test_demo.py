"""`ivmstream demo` runs the whole stack, verifies the views and cleans up every process it started."""

from __future__ import annotations

import subprocess

from helpers import ivm


def _children_named(pattern: str) -> set[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def test_demo_passes_and_cleans_up():
    before = _children_named("ivmstream-demo-") | _children_named("demo.reference")
    proc = ivm("demo", timeout=300)
    assert "reference: stream vs offline replay: MATCH" in proc.stdout
    assert "reconcile reference: MATCH on 5 key(s)" in proc.stdout
    assert proc.stdout.rstrip().endswith("demo passed: every view matches its independent recomputation")
    assert "Traceback" not in proc.stderr
    after = _children_named("ivmstream-demo-") | _children_named("demo.reference")
    assert after <= before  # no worker, broker or redis-server left behind
