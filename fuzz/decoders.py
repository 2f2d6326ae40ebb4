"""atheris harness over the event decoders and input readers (fuzz/targets.py says what it checks).

    python fuzz/decoders.py [libFuzzer flags] [CORPUS_DIR ...]

e.g. ``-runs=N -seed=S`` for a bounded, reproducible run or ``-max_total_time=SECONDS``; ``make fuzz``
runs it for longer and keeps any crash under fuzz/corpus/. Python code is instrumented for coverage;
the compiled decoder is exercised but not instrumented (it is checked against the Python decoders).
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris  # type: ignore[import-untyped]  # ships no type hints

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

with atheris.instrument_imports(include=["ivmstream.events", "fuzz"]):
    from fuzz.targets import run_one


def main() -> None:
    atheris.Setup(sys.argv, run_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
