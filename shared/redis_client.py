"""Redis connections that fail with one clear line instead of a hang or a traceback."""

from __future__ import annotations

import redis


class RedisUnavailable(RuntimeError):
    pass


def connect(url: str, timeout: float = 5.0) -> redis.Redis:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=30.0)
        client.ping()
    except ValueError as exc:
        raise RedisUnavailable(f"bad Redis URL {url!r}: {exc}") from None
    except redis.RedisError as exc:
        raise RedisUnavailable(f"cannot reach Redis at {url}: {exc}") from None
    return client
