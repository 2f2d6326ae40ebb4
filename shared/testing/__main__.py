"""``python -m ivmstream.testing digest SERVICE WORKLOAD``: the second run of ``check_determinism``, in a
process of its own (another hash seed), printing the workload's state digest as JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from ivmstream.testing._cases import conformance_cases
from ivmstream.testing._engine_checks import state_digest


def _main(argv: Sequence[str]) -> int:
    if len(argv) != 3 or argv[0] != "digest":
        print("usage: python -m ivmstream.testing digest SERVICE WORKLOAD", file=sys.stderr)
        return 2
    [case] = [c for c in conformance_cases([argv[1]]) if c.workload.name == argv[2]]
    sys.stdout.write(json.dumps(state_digest(case)))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
