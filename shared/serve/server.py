"""Running the results API: its sources opened from the command line's URLs, uvicorn serving it (over TLS
when given a certificate), in the foreground or, for tests and the demo, on a thread of its own."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI

from ivmstream.postgres_client import connect as connect_postgres
from ivmstream.redis_client import connect as connect_redis
from ivmstream.secrets import redis_credentials
from ivmstream.serve.app import create_app
from ivmstream.serve.sources import PostgresSource, RedisSource, ResultSource


def open_sources(
    redis_url: str | None, postgres_dsn: str | None
) -> tuple[ResultSource, PostgresSource | None]:
    """The lookup source (Redis if given, else PostgreSQL) and the history source (PostgreSQL, if
    given); each server is reached once first, so a wrong address is one line at start."""
    if redis_url is None and postgres_dsn is None:
        raise ValueError("give --redis, --postgres or both")
    history = None
    if postgres_dsn is not None:
        connect_postgres(postgres_dsn).close()
        history = PostgresSource(postgres_dsn)
    if redis_url is None:
        assert history is not None
        return history, history
    connect_redis(redis_url).close()
    credentials = {} if urlsplit(redis_url).password else redis_credentials()
    client = aioredis.from_url(redis_url, socket_connect_timeout=5.0, **credentials)
    return RedisSource(client), history


@dataclass
class Tls:
    certfile: str
    keyfile: str


class Server:
    """uvicorn serving ``app`` on ``host:port`` (``port`` 0: a free one, known once started)."""

    def __init__(
        self, app: FastAPI, host: str = "127.0.0.1", port: int = 8080, tls: Tls | None = None
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            ssl_certfile=tls.certfile if tls else None,
            ssl_keyfile=tls.keyfile if tls else None,
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.tls = tls
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        sockets = [s for srv in self.server.servers for s in srv.sockets]
        return int(sockets[0].getsockname()[1]) if sockets else int(self.server.config.port)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.server.config.host}:{self.port}"

    def run(self) -> None:
        """In the foreground, until SIGINT or SIGTERM."""
        self.server.run()

    def start(self, timeout: float = 15.0) -> Server:
        """On a thread of its own; returns once it listens."""
        self._thread = threading.Thread(target=self.server.run, name="ivmstream-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the results API did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)


def build(redis_url: str | None, postgres_dsn: str | None, token: str | None = None) -> FastAPI:
    source, history = open_sources(redis_url, postgres_dsn)
    return create_app(source, history=history, token=token)
