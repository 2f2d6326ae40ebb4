"""Every reason code the code can emit appears in the docs.

A reason code is a metric label and the ``ivmstream.reason`` header of a dead letter: an operator looks
it up in the docs. The codes are the decoder's registry (``ivmstream.events.reasons.REASONS``) plus
those the runtime, replay and the engines emit, found in the source where a refusal is built: the code
argument of ``Rejection``, ``EventError``, ``Refused`` and ``Rejected``, a ``code = "..."``
assignment, and a ``(code, detail)`` or ``(record, code, detail)`` tuple whose detail is an f-string or
a variable named ``detail``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ivmstream.events.reasons import REASONS

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
REFUSALS = frozenset(("Rejection", "EventError", "Refused", "Rejected"))
NOT_CODES = frozenset(("service",))  # a field name the scan's tuple rule picks up, not a reason


def _candidates(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return list(node.args[:2]) if name in REFUSALS else []
    if isinstance(node, ast.Tuple) and len(node.elts) in (2, 3):
        code, detail = node.elts[-2], node.elts[-1]
        if isinstance(detail, ast.JoinedStr) or (isinstance(detail, ast.Name) and detail.id == "detail"):
            return [code]
        return []
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets):
        return [node.value]
    return []


def emitted_codes() -> dict[str, set[str]]:
    """Each reason code found in shared/ and services/, with the files that emit it."""
    found: dict[str, set[str]] = {code: {"shared/events/reasons.py"} for code in REASONS}
    for folder in ("shared", "services"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                for expr in _candidates(node):
                    for leaf in ast.walk(expr):
                        text = leaf.value if isinstance(leaf, ast.Constant) else None
                        if isinstance(text, str) and CODE.match(text) and text not in NOT_CODES:
                            found.setdefault(text, set()).add(str(path.relative_to(ROOT)))
    return found


def documented_codes() -> set[str]:
    """Every `word` written in backticks in README.md and docs/."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {m for path in texts for m in re.findall(r"`([a-z][a-z0-9-]*)`", path.read_text())}


def test_the_scan_finds_the_codes_of_the_decoder_the_runtime_and_the_engines() -> None:
    codes = emitted_codes()
    for code in (
        "unexpected-column",
        "misrouted",
        "keyless-partition",
        "absent-tuple",
        "non-positive-volume",
    ):
        assert code in codes


def test_every_emitted_reason_code_is_documented() -> None:
    documented = documented_codes()
    missing = {code: sorted(files) for code, files in emitted_codes().items() if code not in documented}
    assert not missing, f"reason codes emitted but documented nowhere in README.md or docs/: {missing}"
