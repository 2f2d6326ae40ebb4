"""Redis connections that fail with one clear line instead of a hang or a traceback.

Credentials come from the URL (``redis://user:password@host:port/db``) or, to keep them off the command
line, from IVMSTREAM_REDIS_USERNAME / IVMSTREAM_REDIS_PASSWORD (or their ``_FILE`` variants) for a URL
without them. ``rediss://`` connects over TLS; certificates are named by the URL's query parameters
(``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_cert_reqs``). No message shows a password.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import redis

from ivmstream.secrets import REDIS_PASSWORD_ENV, redact, redact_url, redis_credentials, register


class RedisUnavailable(RuntimeError):
    pass


def connect(url: str, timeout: float = 5.0) -> redis.Redis:
    shown = redact_url(url)
    given_password = False
    try:
        parts = urlsplit(url)
        register(unquote(parts.password) if parts.password else None)
        credentials = {} if parts.password else redis_credentials()
        if parts.username and "password" in credentials:
            credentials.pop("username", None)  # the URL names the user; the environment its password
        given_password = bool(parts.password or credentials.get("password"))
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=30.0, **credentials)
        client.ping()
    except (ValueError, TypeError) as exc:  # TypeError: an unknown query parameter
        raise RedisUnavailable(f"bad Redis URL {shown!r}: {redact(str(exc))}") from None
    except redis.AuthenticationError as exc:
        if not given_password:
            raise RedisUnavailable(
                f"Redis at {shown} needs a password and none was given (in the URL, or in "
                f"{REDIS_PASSWORD_ENV} or {REDIS_PASSWORD_ENV}_FILE)"
            ) from None
        raise RedisUnavailable(f"Redis at {shown} refused the credentials: {redact(str(exc))}") from None
    except redis.ResponseError as exc:  # e.g. NOAUTH: a password is needed and none was given
        raise RedisUnavailable(f"Redis at {shown} refused the connection: {redact(str(exc))}") from None
    except redis.RedisError as exc:
        raise RedisUnavailable(f"cannot reach Redis at {shown}: {redact(str(exc))}") from None
    return client
