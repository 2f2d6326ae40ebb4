"""`sql replay` of DBToaster's queries against DBToaster's own expected results.

The expected values are data, read from ``tests/data/dbtoaster-expected`` (one JSON file per query,
taken from dbtoaster-a5's ``test/unit/queries/*`` and ``test/results/tpch/*``; each file names its
source and commit). A DBToaster result is one map per output aggregate ("toplevel"), keyed by the
group-by values, and a map holds no key whose value is 0: a missing key reads as 0. Numbers agree
within double rounding (relative 1e-9: DBToaster computes in doubles).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ivmstream.sql import load_script
from ivmstream.sql.inputs import InputChoice
from ivmstream.sql.replay import replay_script
from ivmstream.sql.routing import plan_script
from tests.unit.sql.oracle import DATA, ROOT, SHARED, dbtoaster_cwd

EXPECTED = Path(__file__).resolve().parents[2] / "data" / "dbtoaster-expected"
TPCH = ["query1", "query3", "query5", "query6", "query10", "query12", "query14", "query17", "query17a"]
TPCH += ["query18", "query18a", "query19"]
FINANCE = ["vwap", "pricespread", "missedtrades", "brokervariance", "axfinder", "brokerspread"]


def _value(text: Any) -> Any:
    if isinstance(text, str):
        s = text.strip()
        if len(s) >= 2 and s[0] == s[-1] == "'":
            return s[1:-1]  # a results file quotes its strings, spaces inside kept
        try:
            return float(s)
        except ValueError:
            return text
    return float(text) if isinstance(text, int | float) else text


def _key(values: list[Any]) -> tuple[Any, ...]:
    out = []
    for v in values:
        v = _value(v)
        out.append(v if isinstance(v, str) else float(v))
    return tuple(out)


def _close(a: Any, b: Any) -> bool:
    if a is None:  # DBToaster has no NULL: an empty SUM, AVG or 0/0 is 0
        return False
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)


def compare(result: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Differences between a replayed view and DBToaster's toplevel maps (empty when they agree)."""
    columns = [c.lower() for c in result["columns"]]
    aggregates = {name.lower(): entry for name, entry in expected.items()}
    missing = [n for n in aggregates if n not in columns]
    if missing:
        return [f"no column {name} in {columns}" for name in missing]
    keys = [i for i, c in enumerate(columns) if c not in aggregates]
    problems = []
    for name, entry in aggregates.items():
        i = columns.index(name)
        ours = {_key([r[k] for k in keys]): r[i] for r in result["rows"]}
        if entry["type"] == "singleton":
            theirs = {(): _value(entry["expected"])}
        else:
            theirs = {_key(row[:-1]): _value(row[-1]) for row in entry["expected"]}
        for key in set(ours) | set(theirs):
            a, b = ours.get(key, 0.0), theirs.get(key, 0.0)
            if not _close(a, b):
                problems.append(f"{name}{list(key)}: ours {a}, DBToaster's {b}")
    return problems


def _path(query: str) -> Path:
    return ROOT / ("tpch" if query.startswith("query") else "finance") / f"{query}.sql"


def _check(tmp_path: Path, query: str, dataset: str, data: Path) -> None:
    expected = json.loads((EXPECTED / f"{query}.json").read_text())["datasets"][dataset]
    with dbtoaster_cwd(tmp_path, data):
        script = load_script(_path(query))
        (result,) = replay_script(script, plan_script(script), InputChoice({}, dataset))
    problems = compare(result, expected)
    assert not problems, problems[:10]


@pytest.mark.parametrize("query", TPCH + FINANCE)
def test_replay_equals_dbtoasters_expected_results_on_tiny(tmp_path: Path, query: str) -> None:
    _check(tmp_path, query, "tiny", DATA)


@pytest.mark.parametrize("query", TPCH)
def test_replay_equals_dbtoasters_expected_results_on_tiny_del(tmp_path: Path, query: str) -> None:
    _check(tmp_path, query, "tiny_del", DATA)


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHARED / "tpch" / "standard").is_dir(), reason="DBToaster's standard data sets absent"
)
@pytest.mark.parametrize("dataset", ["standard", "standard_del"])
def test_replay_equals_dbtoasters_expected_results_on_standard(tmp_path: Path, dataset: str) -> None:
    for query in TPCH + (FINANCE if dataset == "standard" else []):
        _check(tmp_path, query, dataset, SHARED)
