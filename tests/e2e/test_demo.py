"""`ivmstream demo` runs the whole stack, verifies the views and waits for every process it started
(workers, broker, redis-server, Spark's JVM and its Python workers) before it exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import REPO, cli_env

pytestmark = pytest.mark.slow  # `make test-fast` leaves these out

MARK = "IVMSTREAM_DEMO_TEST_RUN"


def _left_behind(group: int, mark: str) -> list[str]:
    """Processes still running from the demo's run: in its process group, or carrying its marker in
    their environment (inherited by every descendant, also one that started a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        state, pgrp = fields[0], int(fields[2])
        if state == "Z":  # a zombie has exited; only its parent's wait is missing
            continue
        if pgrp == group or f"{MARK}={mark}".encode() in environ.split(b"\0"):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def test_demo_passes_and_leaves_no_process_running():
    mark = uuid.uuid4().hex
    proc = subprocess.Popen(
        [sys.executable, "-m", "ivmstream.cli", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**cli_env(), MARK: mark},
        cwd=REPO,
        start_new_session=True,  # its own process group, whose id is its pid
    )
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Checked at once: a process that outlives the demo by even a moment is one it did not wait for.
    left = _left_behind(proc.pid, mark)
    with contextlib.suppress(ProcessLookupError):  # whatever is left must not outlive the test either
        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stdout + stderr
    assert not left, "still running after the demo exited:\n" + "\n".join(left)
    verdicts = [line for line in stdout.splitlines() if "stream vs offline replay" in line]
    reconciled = [line for line in stdout.splitlines() if line.strip().startswith("reconcile ")]
    assert verdicts and all(line.endswith("MATCH") for line in verdicts), stdout
    assert any("triangles: stream vs offline replay" in line for line in verdicts)
    assert reconciled and all(": MATCH on " in line for line in reconciled), stdout
    assert stdout.rstrip().endswith("demo passed: every view matches its independent recomputation")
    assert "Traceback" not in stderr
