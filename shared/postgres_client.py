"""PostgreSQL connections that fail with one clear line, credentials kept out of every message.

The DSN is a URL (``postgresql://user@host:5432/db``) or libpq's ``key=value`` form. A DSN without a
password takes it from IVMSTREAM_POSTGRES_PASSWORD (or the file IVMSTREAM_POSTGRES_PASSWORD_FILE
names), so nothing secret is on the command line; libpq's own PGPASSFILE works too. TLS is libpq's:
``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey`` in the DSN.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import conninfo

from ivmstream.secrets import from_env, redact, redact_url, register

POSTGRES_PASSWORD_ENV = "IVMSTREAM_POSTGRES_PASSWORD"


class PostgresUnavailable(RuntimeError):
    pass


def shown(dsn: str) -> str:
    """The DSN as it may be printed (password masked in either form)."""
    if "://" in dsn:
        return redact_url(dsn)
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return redact(dsn)
    return " ".join(f"{k}={'***' if k == 'password' else v}" for k, v in params.items())


def connection_params(dsn: str) -> dict[str, Any]:
    """``dsn`` parsed, the password from the environment added when it has none; secrets registered."""
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise PostgresUnavailable(f"bad PostgreSQL DSN {shown(dsn)!r}: {redact(str(exc))}") from None
    if params.get("password"):
        register(str(params["password"]))
    else:
        password = from_env(POSTGRES_PASSWORD_ENV)
        if password is not None:
            params["password"] = password
    params.setdefault("connect_timeout", 5)
    params.setdefault("application_name", "ivmstream")
    return params


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to ``dsn``; an unreachable server or refused login is one ``PostgresUnavailable``."""
    params = connection_params(dsn)
    try:
        return psycopg.connect(autocommit=autocommit, **params)
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(f"cannot reach PostgreSQL at {shown(dsn)}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip()
    return text.splitlines()[-1] if text else type(exc).__name__
