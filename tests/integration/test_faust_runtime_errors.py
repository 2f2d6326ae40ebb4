"""The Faust runtime stops in one line when Faust itself fails (not the view): a crashed Faust service
(its fetcher, producer, or any task of the app) must not look like a clean exit. Runs the runtime's
``execute`` in a child process, as ``ivmstream run --runtime faust`` does, on the embedded broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from ivmstream.testing._cases import child_environment

CHILD = """
import sys
from ivmstream.config import build_config
from ivmstream.faust.runtime import FaustStopped, execute, faust_worker
from ivmstream.metrics import RuntimeMetrics
from ivmstream.service import load_service
from ivmstream.state import MemoryStore

bootstrap, topic = sys.argv[1], sys.argv[2]
service = load_service("reference")
config = build_config(service, {"key_field": "store", "input_topic": topic})
view = faust_worker(service, config, bootstrap, MemoryStore(), group=topic + "-g",
                    metrics=RuntimeMetrics("reference", runtime="faust"))

@view.app.task
async def broken() -> None:
    raise RuntimeError("a task of the app failed")

try:
    execute(view)
except FaustStopped as exc:
    print(f"one line: {exc}")
    sys.exit(3)
print("clean exit")
"""


def test_a_crash_inside_faust_is_an_error(broker: Any, unique: str, tmp_path: Path) -> None:
    broker.create_topic(unique, 1)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(script), broker.bootstrap, unique],
        env=child_environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr[-3000:]
    assert "one line: Faust stopped: RuntimeError: a task of the app failed" in proc.stdout
