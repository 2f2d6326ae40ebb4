"""Every reason code the code can emit is in a reason registry, and docs/reasons.md is generated from
the registries.

A reason code is a metric label and the ``ivmstream.reason`` header of a dead letter: an operator looks
it up in the docs. The registries are the decoder's (``REASONS``), the change formats'
(``CHANGE_REASONS``), the runtime's (``RUNTIME_REASONS``) and each service's ``reasons``; what the code
emits is found in the source where a refusal is built: the code
argument of ``Rejection``, ``EventError``, ``Refused`` and ``Rejected``, a ``code = "..."``
assignment, and a ``(code, detail)`` or ``(record, code, detail)`` tuple whose detail is an f-string or
a variable named ``detail``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ivmstream.cli.reference import render_reasons
from ivmstream.events.reasons import CHANGE_REASONS, REASONS, RUNTIME_REASONS
from ivmstream.service import available_services, load_service

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reasons.md"
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


def registered_codes() -> dict[str, set[str]]:
    """Each registered code with where it is registered: a platform registry or a service's name."""
    found: dict[str, set[str]] = {}
    for where, registry in (("decoder", REASONS), ("change", CHANGE_REASONS), ("runtime", RUNTIME_REASONS)):
        for code in registry:
            found.setdefault(code, set()).add(where)
    for name in available_services():
        for code in load_service(name).reasons:
            found.setdefault(code, set()).add(name)
    return found


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


def test_every_emitted_reason_code_is_registered() -> None:
    registered = registered_codes()
    missing = {code: sorted(files) for code, files in emitted_codes().items() if code not in registered}
    assert not missing, (
        f"reason codes emitted but in no registry (events/reasons.py, a service's reasons): {missing}"
    )


def test_each_service_declares_the_codes_of_its_own_that_its_folder_emits() -> None:
    """A service may refuse with a platform code (a decoding code its own intake checks again); any
    other code it emits is its own and must be in its ``reasons``, so the page lists it under it."""
    platform = {*REASONS, *CHANGE_REASONS, *RUNTIME_REASONS}
    for code, files in emitted_codes().items():
        for name in {f.split("/")[1] for f in files if f.startswith("services/")}:
            assert code in platform or code in load_service(name).reasons, (
                f"services/{name} emits {code!r} but does not declare it"
            )


def test_the_reasons_page_is_generated_from_the_registries() -> None:
    assert PAGE.read_text() == render_reasons(), (
        "regenerate: python -m ivmstream.cli.reference --reasons > docs/reasons.md"
    )
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", PAGE.read_text(), flags=re.MULTILINE))
    assert set(registered_codes()) == documented
