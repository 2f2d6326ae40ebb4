"""``ivmstream sql explain``: per view, the service and strategy, why, the plan and the cost."""

from __future__ import annotations

import json
from typing import Any

from ivmstream.sql.plan import ViewPlan


def explain_json(plans: list[ViewPlan]) -> list[str]:
    """One JSON object per view (``view``, ``service``, ``strategy``, ``why``, ``plan``, ``cost``)."""
    return [json.dumps(p.explain(), default=str) for p in plans]


def _lines(value: Any, indent: str) -> list[str]:
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{indent}{k}:")
                out.extend(_lines(v, indent + "  "))
            else:
                out.append(f"{indent}{k}: {json.dumps(v, default=str, ensure_ascii=False)}")
        return out
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            return [f"{indent}- {v}" for v in value]
        return [line for v in value for line in _lines(v, indent + "  ")]
    return [f"{indent}{value}"]


def explain_text(plans: list[ViewPlan]) -> str:
    """A readable block per view."""
    blocks = []
    for p in plans:
        e = p.explain()
        lines = [
            f"view {e['view']}: {e['service']} ({e['strategy']})",
            f"  why: {e['why']}",
            f"  cost: {e['cost']}",
            f"  columns: {', '.join(e['columns'])}",
            "  plan:",
            *_lines(e["plan"], "    "),
        ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
