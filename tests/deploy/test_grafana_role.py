"""Grafana's PostgreSQL role (deploy/grafana_role.py) on a real server: it reads the results tables,
those the workers create after it too, and can write, create or change nothing."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest
from psycopg import sql

from deploy.grafana_role import GRAFANA_USER, role_statements
from ivmstream.runtime.postgres import PostgresSink


@pytest.fixture(scope="module")
def grafana_dsn(postgres_server) -> str:
    """The role created as the compose stack's init script creates it (owner: the server's user)."""
    password = uuid.uuid4().hex
    owner_dsn = postgres_server.dsn
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        owner = conn.execute("SELECT current_user").fetchone()[0]
        database = conn.execute("SELECT current_database()").fetchone()[0]
        for statement in role_statements(owner, database):
            literal = sql.Literal(password).as_string(conn)
            conn.execute(statement.replace(":'password'", literal))  # psql's variable, substituted
    return owner_dsn.replace(f"//{owner}@", f"//{GRAFANA_USER}:{password}@")


def test_grafana_reads_the_tables_the_workers_create_afterwards(postgres_server, grafana_dsn):
    view = f"g{uuid.uuid4().hex[:8]}"
    sink = PostgresSink(postgres_server.dsn, view, flush_interval=0.01)
    try:
        record = {
            "service": view,
            "key": "k",
            "result": {"n": 3},
            "offsets": {"t:0": 1},
            "published_at": time.time(),
        }
        sink.submit([("k", record)])
        sink.flush(10)
    finally:
        sink.close()
    with psycopg.connect(grafana_dsn) as conn:
        rows = conn.execute(
            "SELECT key, result FROM ivmstream_results WHERE service = %s", (view,)
        ).fetchall()
        history = conn.execute(
            "SELECT path, value FROM ivmstream_result_history WHERE service = %s", (view,)
        ).fetchall()
    assert rows == [("k", {"n": 3})] and history == [("/n", 3.0)]


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO ivmstream_results VALUES ('x', 'k', '1', '{}', now())",
        "DELETE FROM ivmstream_result_history",
        "CREATE TABLE grafana_was_here (x int)",
        "DROP TABLE ivmstream_results",
    ],
)
def test_grafana_changes_nothing(postgres_server, grafana_dsn, statement):
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:  # the tables exist
        PostgresSink(postgres_server.dsn, "g-tables", flush_interval=0.01).close()
        conn.execute("SELECT 1")
    with psycopg.connect(grafana_dsn) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute(statement)
