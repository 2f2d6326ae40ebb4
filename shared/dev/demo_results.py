"""Where the demo's results can be read: Redis, the results topics, the HTTP API (``ivmstream serve``, run
by the demo) and, when PostgreSQL is installed, ``ivmstream_results`` and its history. PostgreSQL is
optional for the demo: without it the demo says so and the rest runs as before."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ivmstream.dev.postgres_server import PostgresServer, postgres_bindir


@dataclass
class ResultPlaces:
    redis_url: str
    postgres: PostgresServer | None = None
    api_url: str | None = None

    @property
    def postgres_args(self) -> list[str]:
        """What each worker adds to `ivmstream run`."""
        return ["--postgres", self.postgres.dsn] if self.postgres else []


@contextlib.contextmanager
def optional_postgres(say: Callable[[str], None]) -> Iterator[PostgresServer | None]:
    """A throwaway PostgreSQL when one is installed; otherwise None, and a line saying how to add it."""
    if postgres_bindir() is None:
        say("  PostgreSQL: not installed, so no results sink (optional; `make setup-dev` installs it)")
        yield None
        return
    with PostgresServer() as server:
        say(f"  postgresql {server.dsn}")
        yield server


@contextlib.contextmanager
def results_api(places: ResultPlaces) -> Iterator[None]:
    """`ivmstream serve` over the demo's Redis (and PostgreSQL) on a free port, for as long as the demo."""
    from ivmstream.serve.server import Server, build

    server = Server(build(places.redis_url, places.postgres.dsn if places.postgres else None), port=0)
    server.start()
    places.api_url = server.url
    try:
        yield
    finally:
        server.stop()


def show(places: ResultPlaces, views: list[tuple[str, str]], say: Callable[[str], None]) -> None:
    """Print where each view's results are, with one lookup through the HTTP API as an example.
    ``views``: (view name, results topic)."""
    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # its request lines would interleave
    say("\nwhere the results are:")
    say(f"  Redis:   ivmstream results <service> --redis {places.redis_url}")
    say(f"  topics:  {', '.join(topic for _, topic in views)} (every record with the offsets it reflects)")
    if places.api_url:
        say(f"  HTTP:    {places.api_url}/v1/<service>/results[/<key>]  (OpenAPI: {places.api_url}/docs)")
        say(f"  SSE:     curl -N {places.api_url}/v1/<service>/subscribe?key=<key>")
        view = views[0][0]
        listing = httpx.get(f"{places.api_url}/v1/{view}/results", timeout=10).json()
        if listing.get("keys"):
            key = listing["keys"][0]
            record: dict[str, Any] = httpx.get(f"{places.api_url}/v1/{view}/results/{key}", timeout=10).json()
            text = orjson.dumps({k: record[k] for k in ("service", "key", "offsets")}).decode()
            say(f"           GET /v1/{view}/results/{key} -> {text} ...")
    if places.postgres is None:
        say("  PostgreSQL: not running (not installed)")
        return
    import psycopg

    with psycopg.connect(places.postgres.dsn) as conn:
        rows = conn.execute(
            "SELECT r.service, count(*), (SELECT count(*) FROM ivmstream_result_history h "
            "WHERE h.service = r.service) FROM ivmstream_results r GROUP BY r.service ORDER BY 1"
        ).fetchall()
    say(f"  PostgreSQL: psql {places.postgres.dsn}")
    for view, keys, points in rows:
        say(f"           {view}: {keys} rows in ivmstream_results, {points} in ivmstream_result_history")
