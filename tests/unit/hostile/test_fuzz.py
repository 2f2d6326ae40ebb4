"""The fuzzer's regression inputs replay clean, and a short, seeded fuzzing run finds no crash.

fuzz/targets.py defines a crash (decoders that disagree, an unknown reason code, a value of the wrong
type accepted, a reader raising out of the middle of a file); fuzz/corpus/ keeps every input that ever
crashed, fuzz/seeds/ one valid input per target. ``make fuzz`` runs the same harness for longer.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FUZZ = REPO / "fuzz"
sys.path.insert(0, str(REPO))

from fuzz.targets import TARGETS, run_one  # noqa: E402 - the repository root is not a package path

CORPUS = sorted((FUZZ / "corpus").iterdir())
SEEDS = sorted((FUZZ / "seeds").iterdir())


@pytest.mark.parametrize("path", CORPUS + SEEDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_replay(path: Path) -> None:
    run_one(path.read_bytes())


def test_every_target_has_a_seed() -> None:
    assert {TARGETS[p.read_bytes()[0] % len(TARGETS)] for p in SEEDS} == set(TARGETS)
    assert CORPUS, "fuzz/corpus/ holds the inputs that once crashed; it must not be empty"


def test_bounded_fuzzing_run(tmp_path: Path) -> None:
    """3000 inputs from a fixed seed (capped at 25 s on a slow machine): no crash."""
    work, artifacts = tmp_path / "work", tmp_path / "artifacts"
    work.mkdir()
    artifacts.mkdir()
    cmd = [sys.executable, str(FUZZ / "decoders.py"), "-runs=3000", "-seed=1", "-max_total_time=25"]
    cmd += [f"-artifact_prefix={artifacts}/", str(work), str(FUZZ / "seeds")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    found = sorted(artifacts.iterdir())
    assert proc.returncode == 0 and not found, (
        f"the fuzzer crashed; keep the input under fuzz/corpus/ once fixed: {found}\n{proc.stderr[-3000:]}"
    )
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert done is not None and int(done.group(1)) > 0, proc.stderr[-2000:]


@pytest.mark.parametrize(
    ("target", "text"),
    [("csv", b"i,k\n1,\xff\n2,ok\n"), ("orderbook", b"1,10,B,100,5.5\n\xff,1,B,1,1\n2,11,B,1,1\n")],
)
def test_a_line_that_is_not_utf8_becomes_an_error_record(target: str, text: bytes, tmp_path: Path) -> None:
    from ivmstream.events import read_csv, read_orderbook

    path = tmp_path / "input"
    path.write_bytes(text)
    records = list(read_csv(path, "t") if target == "csv" else read_orderbook(path, book="bids"))
    assert [r.lineno for r in records if r.error] == [2]
    assert "UTF-8" in next(r.error for r in records if r.error)  # type: ignore[operator]
    assert len([r for r in records if r.error is None]) == (1 if target == "csv" else 2)  # CSV: a header
