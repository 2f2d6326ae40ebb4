"""bench/lib/limits stops work without raising inside it: a child that goes silent is killed, and a
DuckDB query is cancelled through DuckDB's own interrupt. No timing is asserted."""

from __future__ import annotations

import time
from contextlib import closing
from typing import Any

import duckdb
import pytest

from bench.lib.limits import Silent, Watchdog, in_child


def test_a_child_that_goes_silent_is_killed() -> None:
    def work(send: Any) -> None:
        send("started")
        time.sleep(600)

    got = []
    with pytest.raises(Silent):
        got.extend(in_child(work, quiet_for=0.5))
    assert got == ["started"]


def test_what_a_child_sends_arrives_and_its_error_is_raised_here() -> None:
    assert list(in_child(lambda send: [send(i) for i in range(3)], quiet_for=60)) == [0, 1, 2]

    def fail(_send: Any) -> None:
        raise ValueError("in the child")

    with pytest.raises(RuntimeError, match="ValueError: in the child"):
        list(in_child(fail, quiet_for=60))


def test_the_watchdog_interrupts_a_duckdb_query() -> None:
    con, dog = duckdb.connect(), Watchdog(poll=0.01)
    with closing(dog), dog.limit(0.2, con.interrupt) as fired, pytest.raises(duckdb.InterruptException):
        con.execute("SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b").fetchall()
    assert fired()


def test_the_watchdog_lets_a_quick_query_finish() -> None:
    con, dog = duckdb.connect(), Watchdog(poll=0.01)
    with closing(dog), dog.limit(60, con.interrupt) as fired:
        assert con.execute("SELECT 42").fetchall() == [(42,)]
    assert not fired()
