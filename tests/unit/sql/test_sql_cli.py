"""``ivmstream sql explain|replay`` through the command line's entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ivmstream.cli import main
from tests.unit.sql.oracle import DATA, ROOT, dbtoaster_cwd

EXAMPLES = ROOT.parent / "examples"


def test_explain_json_prints_one_object_per_view(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        assert main(["sql", "explain", str(ROOT / "finance" / "missedtrades.sql"), "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    obj = json.loads(line)
    assert (obj["view"], obj["service"], obj["strategy"]) == ("missedtrades_1", "vwap", "rpai")
    assert obj["plan"]["parameters"] == {"fraction": "1/4", "brokers": 10}


def test_replay_prints_one_json_line_per_view(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with dbtoaster_cwd(tmp_path, DATA):
        assert main(["sql", "replay", str(ROOT / "tpch" / "query6.sql"), "--dataset", "tiny"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    obj = json.loads(line)
    assert obj["view"] == "query6_1" and obj["service"] == "fivm" and obj["columns"] == ["revenue"]
    assert len(obj["rows"]) == 1


def test_replay_every_and_input_override(capsys: pytest.CaptureFixture[str]) -> None:
    edges = str(EXAMPLES / "edges.csv")
    code = main(
        ["sql", "replay", str(EXAMPLES / "triangles.sql"), "--input", f"edges={edges}", "--every", "200"]
    )
    assert code == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x.get("after") for x in lines[:2]] == [200, 400] and "after" not in lines[-1]


def test_a_refused_view_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.sql"
    path.write_text(
        "CREATE STREAM r (a INT) FROM FILE 'r.csv' LINE DELIMITED CSV;\nSELECT SUM(r.q) FROM r;\n"
    )
    assert main(["sql", "explain", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{path}:2:12: unknown column 'q'" in err, err


@pytest.mark.parametrize("verb", [["replay"], ["bootstrap"], ["reconcile", "--bootstrap", "localhost:1"]])
def test_an_input_override_without_a_path_is_one_line_on_stderr(
    verb: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every verb that reads the tables' files (replay, and Spark's bootstrap and reconcile, before a
    session starts) refuses an --input that is not TABLE=PATH."""
    assert main(["sql", verb[0], str(EXAMPLES / "triangles.sql"), *verb[1:], "--input", "edges"]) == 1
    assert capsys.readouterr().err.strip() == "ivmstream: error: --input 'edges': expected TABLE=PATH"


def test_an_input_override_that_is_a_url_with_a_password_is_refused_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A refused --input is echoed, so a password in a URL given as the whole option is masked."""
    bad = "s3a://reader:hunter2-secret@bucket/edges.csv"
    assert main(["sql", "replay", str(EXAMPLES / "triangles.sql"), "--input", bad]) == 1
    err = capsys.readouterr().err.strip()
    assert "hunter2-secret" not in err and "expected TABLE=PATH" in err and "reader:***@bucket" in err, err
