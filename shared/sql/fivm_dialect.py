"""F-IVM's ring lifts inside aggregates: ``[lift<k>: RingCofactor<...>](col)`` (and the relational,
factorized and degree forms of the F-IVM examples), rewritten to the column itself.

The lift says which ring the view computes in and which column is lifted; the rewrite keeps the
statement's length, so positions stay right.
"""

from __future__ import annotations

import re

from ivmstream.sql.source import Statement

_LIFT = re.compile(
    r"\[\s*lift\s*(<\s*\d+\s*>)?\s*:\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<[^\]]*>)?\s*\]", re.IGNORECASE
)
_LIFT_ARG = re.compile(r"\s*\(\s*([A-Za-z_][A-Za-z0-9_.]*)")


def rewrite_lifts(stmt: Statement) -> dict[str, str]:
    """{column: ring type name} of every lift; each ``[lift...]`` becomes blanks."""
    out: dict[str, str] = {}
    for m in reversed(list(_LIFT.finditer(stmt.text))):
        arg = _LIFT_ARG.match(stmt.text, m.end())
        column = arg.group(1).split(".")[-1].lower() if arg else ""
        out[column] = m.group(2).lower()
        stmt.blank(m.start(), m.end())
    return out
