"""Where ``ivmstream serve`` reads published results: Redis (each output topic's latest results, and a
pub/sub channel per topic naming the keys each write changed) or PostgreSQL (``ivmstream_results``, its
history, and NOTIFY on ``ivmstream_results``). A view is named by its output topic without ``.results``
(``ivmstream.runtime.postgres.view_name``), the same name in both."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import orjson
import psycopg
import redis.asyncio as aioredis

from ivmstream.postgres_client import connection_params
from ivmstream.runtime.output import RESULT_PREFIX, changes_channel, result_index, result_key
from ivmstream.runtime.postgres import CHANNEL, HISTORY_TABLE, RESULTS_TABLE, view_name

Record = dict[str, Any]


class ResultSource(Protocol):
    async def views(self) -> list[str]: ...

    async def keys(self, view: str) -> list[str] | None:
        """The view's keys; None for a view this source has never held."""
        ...

    async def get(self, view: str, key: str) -> Record | None: ...

    async def get_many(self, view: str, keys: list[str]) -> dict[str, Record]:
        """The records of those of ``keys`` that have one, in one round trip (a change names many)."""
        ...

    def changes(self, ready: Callable[[], None]) -> AsyncIterator[tuple[str, list[str]]]:
        """(view, keys whose result changed), as the workers write them; ``ready`` is called once
        the source listens."""
        ...

    async def close(self) -> None: ...


class RedisSource:
    """Results as the workers keep them in Redis (``ivmstream.runtime.output``)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._topics: dict[str, str] = {}  # view -> output topic

    async def _topic(self, view: str) -> str | None:
        topic = self._topics.get(view)
        if topic is None:
            for candidate in (f"{view}.results", view):
                if await self.client.exists(result_index(candidate)):
                    self._topics[view] = topic = candidate
                    break
        return topic

    async def views(self) -> list[str]:
        found = set()
        async for name in self.client.scan_iter(match=result_index("*"), count=1000):
            topic = _text(name).removeprefix(f"{RESULT_PREFIX}:").removesuffix(":__keys__")
            self._topics[view_name(topic)] = topic
            found.add(view_name(topic))
        return sorted(found)

    async def keys(self, view: str) -> list[str] | None:
        topic = await self._topic(view)
        if topic is None:
            return None
        return sorted(_text(k) for k in await self.client.smembers(result_index(topic)))

    async def get(self, view: str, key: str) -> Record | None:
        topic = await self._topic(view)
        if topic is None:
            return None
        value = await self.client.get(result_key(topic, key))
        if value is None:
            return None
        return _named(orjson.loads(value), view)

    async def get_many(self, view: str, keys: list[str]) -> dict[str, Record]:
        topic = await self._topic(view)
        if topic is None or not keys:
            return {}
        values = await self.client.mget([result_key(topic, key) for key in keys])
        return {
            key: _named(orjson.loads(v), view) for key, v in zip(keys, values, strict=True) if v is not None
        }

    async def changes(self, ready: Callable[[], None]) -> AsyncIterator[tuple[str, list[str]]]:
        pubsub = self.client.pubsub()
        await pubsub.psubscribe(changes_channel("*"))
        ready()
        try:
            async for message in pubsub.listen():
                if message["type"] != "pmessage":
                    continue
                topic = (
                    message["channel"].decode().removeprefix(f"{RESULT_PREFIX}:").removesuffix(":__changes__")
                )
                view = view_name(topic)
                self._topics.setdefault(view, topic)
                yield view, orjson.loads(message["data"])
        finally:
            await pubsub.aclose()

    async def close(self) -> None:
        await self.client.aclose()


class PostgresSource:
    """Results as the PostgreSQL sink keeps them (``ivmstream.runtime.postgres``), and their history."""

    def __init__(self, dsn: str) -> None:
        self.params = connection_params(dsn)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def _query(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """One query on the shared connection, reconnecting once if it was lost."""
        async with self._lock:
            for attempt in (0, 1):
                if self._conn is None or self._conn.closed:
                    self._conn = await psycopg.AsyncConnection.connect(autocommit=True, **self.params)
                try:
                    cur = await self._conn.execute(sql, args)  # type: ignore[arg-type]
                    return await cur.fetchall()
                except psycopg.OperationalError:
                    await self._conn.close()
                    self._conn = None
                    if attempt:
                        raise
        raise AssertionError("unreachable")

    async def views(self) -> list[str]:
        rows = await self._query(f"SELECT DISTINCT service FROM {RESULTS_TABLE} ORDER BY service", ())
        return [row[0] for row in rows]

    async def keys(self, view: str) -> list[str] | None:
        rows = await self._query(f"SELECT key FROM {RESULTS_TABLE} WHERE service = %s ORDER BY key", (view,))
        return [row[0] for row in rows] or None

    async def get(self, view: str, key: str) -> Record | None:
        rows = await self._query(
            f"SELECT result, offsets, updated_at FROM {RESULTS_TABLE} WHERE service = %s AND key = %s",
            (view, key),
        )
        if not rows:
            return None
        result, offsets, updated_at = rows[0]
        return _row_record(view, key, result, offsets, updated_at)

    async def get_many(self, view: str, keys: list[str]) -> dict[str, Record]:
        if not keys:
            return {}
        rows = await self._query(
            f"SELECT key, result, offsets, updated_at FROM {RESULTS_TABLE} "
            "WHERE service = %s AND key = ANY(%s)",
            (view, keys),
        )
        return {key: _row_record(view, key, *rest) for key, *rest in rows}

    async def history(
        self, view: str, key: str, path: str | None, since: float | None, limit: int
    ) -> list[Record]:
        """A key's numeric history, oldest first: at most ``limit`` points from ``since`` (epoch s)."""
        rows = await self._query(
            f"""SELECT at, path, value, offsets FROM {HISTORY_TABLE}
                WHERE service = %s AND key = %s AND (%s::text IS NULL OR path = %s)
                  AND at >= coalesce(%s::timestamptz, '-infinity')
                ORDER BY at DESC, path LIMIT %s""",
            (view, key, path, path, _timestamp(since), limit),
        )
        return [
            {"at": at.timestamp(), "path": p, "value": value, "offsets": offsets}
            for at, p, value, offsets in reversed(rows)
        ]

    async def changes(self, ready: Callable[[], None]) -> AsyncIterator[tuple[str, list[str]]]:
        conn = await psycopg.AsyncConnection.connect(autocommit=True, **self.params)
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            ready()
            async for notice in conn.notifies():
                payload = orjson.loads(notice.payload)
                yield payload["service"], payload["keys"]
        finally:
            await conn.close()

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


def _named(record: Record, view: str) -> Record:
    record["service"] = view  # the view's name, as PostgreSQL's rows and the URL have it
    return record


def _row_record(view: str, key: str, result: Any, offsets: Any, updated_at: dt.datetime) -> Record:
    return {
        "service": view,
        "key": key,
        "result": result,
        "offsets": offsets,
        "published_at": updated_at.timestamp(),
    }


def _timestamp(since: float | None) -> dt.datetime | None:
    return None if since is None else dt.datetime.fromtimestamp(since, dt.UTC)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
