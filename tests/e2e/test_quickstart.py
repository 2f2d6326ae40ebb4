"""docs/quickstart.md, followed literally: every ```sh block of the page runs, in order, in one bash
session in an empty directory with the package's commands on PATH, and the ```json or ```text block
right after a block is the last line that block prints (for JSON, the fields shown must be equal;
fields left out are not compared). The one change made to the page's text is the Redis port, moved
to a free one."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "quickstart.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)
MARK = "@@quickstart-block@@"
PAGE_PORT = "6399"


def blocks() -> list[tuple[str, str, str | None, str | None]]:
    """``(command block, expected-output kind, expected output)`` in page order."""
    found = [(m.group(1), m.group(2)) for m in BLOCK.finditer(PAGE.read_text())]
    out: list[tuple[str, str, str | None, str | None]] = []
    for i, (lang, body) in enumerate(found):
        if lang != "sh":
            continue
        nxt = found[i + 1] if i + 1 < len(found) else None
        if nxt is not None and nxt[0] in ("json", "text"):
            out.append((lang, body, nxt[0], nxt[1].strip()))
        else:
            out.append((lang, body, None, None))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def contains(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(contains(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return type(actual) is type(expected) and actual == expected


def test_every_command_of_the_quickstart_runs_and_prints_what_the_page_shows(tmp_path: Path) -> None:
    page = blocks()
    assert len(page) >= 8, "the quickstart has a block per service and the streaming ones"
    port = str(free_port())
    script = ["set -euo pipefail"]
    for _lang, body, _kind, _expected in page:
        script.append(body.replace(PAGE_PORT, port))
        script.append(f"echo {MARK}")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    work = tmp_path / "work"
    work.mkdir()
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout_file, err.open("w") as stderr_file:
        # files, not pipes: a background process the page starts must not hold the test's output open
        proc = subprocess.Popen(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env=env,
            stdout=stdout_file,
            stderr=stderr_file,
            text=True,
            start_new_session=True,  # the page's background processes are killed with the group below
        )
        try:
            proc.wait(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = out.read_text(), err.read_text()
    outputs = stdout.split(MARK + "\n")
    assert proc.returncode == 0 and len(outputs) == len(page) + 1, (
        f"a block failed (exit {proc.returncode}) after {len(outputs) - 1} of {len(page)} blocks\n"
        f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    )
    for (_lang, body, kind, expected), output in zip(page, outputs, strict=False):
        if kind is None:
            continue
        assert expected is not None
        lines = output.strip().splitlines()
        assert lines, f"no output from:\n{body}"
        if kind == "text":
            assert lines[-1] == expected, f"{body}\nprinted {lines[-1]!r}, the page shows {expected!r}"
        else:
            printed = json.loads(lines[-1])
            assert contains(printed, json.loads(expected)), (
                f"{body}\nprinted {lines[-1]}\nthe page shows {expected}"
            )
