"""``bootstrap`` and ``reconcile`` (and their ``sql`` forms) stop a Spark session they started, its JVM
included, and leave an active one (a test's, a notebook's) running."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

import ivmstream.spark.session as session


def _fakes(monkeypatch: pytest.MonkeyPatch, active: Any) -> list[Any]:
    stopped: list[Any] = []
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: active))
    monkeypatch.setattr(session, "get_session", lambda master=None: active or "started")
    monkeypatch.setattr(session, "stop_session", stopped.append)
    return stopped


def test_a_session_the_command_started_is_stopped_even_on_failure(monkeypatch):
    stopped = _fakes(monkeypatch, None)
    with pytest.raises(RuntimeError), session.command_session("local[1]") as spark:
        assert spark == "started"
        raise RuntimeError("the job failed")
    assert stopped == ["started"]


def test_an_active_session_is_borrowed(monkeypatch):
    stopped = _fakes(monkeypatch, "active")
    with session.command_session(None) as spark:
        assert spark == "active"
    assert stopped == []
