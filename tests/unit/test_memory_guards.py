"""Memory guards: each service retains N tuples through ``replay`` in a child process (bench/memory.py's
workloads) and its RSS per retained tuple must stay under a documented bound; the reservoir's and
firstorder's change logs must cost at most 200 bytes per pending entry between checkpoints. An encoded
value kept at 4 KiB (an orjson result held as a key) or a log that grows without checkpoints breaks
these by 10x or more.

The bounds (bytes of RSS per retained tuple, N = 20,000; docs/memory.md has the measured figures):

| service | bound | why that much |
|---|---:|---|
| reference | 400 | a member key (bytes) and its multiplicity per distinct tuple |
| reservoir | 2,500 | each edge in both aliases, both index nodes and the directed structures |
| sketches | 1,600 | 2x the dict-of-tuples floor of a 16-column lineitem row |
| triangles | 340 | 2x the dict-of-tuples floor of an edge (about 170); no change log without checkpoints |
| vwap | 700 | the bag tuple and its RPAI tree node |
| fivm | 200 | views only: the count ring keeps no base tuple |
| firstorder | 400 | 2x the dict-of-tuples floor of a bid or ask (about 200): bag, index bucket, group |
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO, bench_markdown, generated_block

N = 20_000
BOUNDS = {
    "reference": 400,
    "reservoir": 2500,
    "sketches": 1600,
    "triangles": 340,
    "vwap": 700,
    "fivm": 200,
    "firstorder": 400,
}
LOG_BOUND = 200  # bytes per pending entry between checkpoints (the reservoir, firstorder)


def child(kind: str, service: str, n: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "bench/memory.py", "--child", kind, service, str(n)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("service", sorted(BOUNDS))
def test_replay_keeps_each_tuple_within_its_bound(service):
    got = child("replay", service, N)
    assert got["rejected"] == 0
    per_tuple = got["steady"] / got["retained"]
    assert per_tuple <= BOUNDS[service], f"{service}: {per_tuple:.0f} B per retained tuple"


@pytest.mark.parametrize("service", ["reservoir", "firstorder"])
def test_log_costs_what_its_entries_hold(service):
    """n tuples checkpointed, n more pending: the pending log against the same state without one."""
    n = N // 2
    log, nolog = child("log", service, n), child("nolog", service, n)
    per_entry = (log["pending"] - nolog["state"]) / log["entries"]
    assert per_entry <= LOG_BOUND, f"{per_entry:.0f} B per pending entry"


def test_docs_tables_are_the_stored_run():
    """docs/memory.md's tables are what ``bench/memory.py --markdown`` prints from the stored report."""
    printed = bench_markdown("memory.py")
    assert generated_block(REPO / "docs" / "memory.md", "memory.py").strip("\n") == printed.strip("\n"), (
        "docs/memory.md is out of date: replace the block between the markers with "
        "`.venv/bin/python bench/memory.py --markdown`"
    )
