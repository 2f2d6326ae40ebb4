"""The deployment generators (``deploy/``) are not part of the installed package: import them from the
repository, however pytest was started."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parents[2])
if REPO not in sys.path:
    sys.path.insert(0, REPO)
