"""Credentials: where they come from, and keeping them out of every line the program writes.

A password may reach the program in a Redis URL, a Kafka SASL or TLS setting, or a file named by an
environment variable. Each one is registered here as it is read, and every error line, log record and
debug traceback goes through ``redact`` first, so a secret cannot leak through a message some library
composed (an exception that quotes a URL, librdkafka's own log lines). URLs with an embedded password
are masked even when their secret was never registered. See docs/security.md.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"

# Redis: the password (and user) for a URL that leaves them out.
REDIS_USERNAME_ENV = "IVMSTREAM_REDIS_USERNAME"
REDIS_PASSWORD_ENV = "IVMSTREAM_REDIS_PASSWORD"

# Kafka: librdkafka settings every client of the process gets (consumers, producers, admin probes).
# Each may also be given as NAME_FILE, the path of a file holding the value.
KAFKA_ENV: dict[str, str] = {
    "IVMSTREAM_KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "IVMSTREAM_KAFKA_SASL_MECHANISM": "sasl.mechanisms",
    "IVMSTREAM_KAFKA_SASL_USERNAME": "sasl.username",
    "IVMSTREAM_KAFKA_SASL_PASSWORD": "sasl.password",
    "IVMSTREAM_KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
    "IVMSTREAM_KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
    "IVMSTREAM_KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
    "IVMSTREAM_KAFKA_SSL_KEY_PASSWORD": "ssl.key.password",
    "IVMSTREAM_KAFKA_SSL_ENDPOINT_IDENTIFICATION": "ssl.endpoint.identification.algorithm",
}

# librdkafka settings whose values are secrets (a key's text, a password, a token, a JAAS line).
_SENSITIVE_SETTING = re.compile(r"password|secret|token|\.pem$|jaas|oauthbearer\.config", re.IGNORECASE)
# scheme://user:password@host: masked in any text, registered or not.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)(?P<secret>[^\s@/]+)(?P<at>@)")
# ?password=...: a secret query parameter of a URL, masked in any text too.
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&][^=&\s]*(?:password|secret|token)[^=&\s]*=)(?P<secret>[^&\s]+)", re.IGNORECASE
)
# Secrets shorter than this are not searched for in free text (every "a" would become ***); they are
# still masked wherever they sit in a URL or a setting shown by name.
MIN_REDACTED_LENGTH = 4

_known: set[str] = set()


class SecretError(RuntimeError):
    """A credential source that cannot be read (the message names the source, never the secret)."""


def register(secret: str | None) -> None:
    """Remember ``secret`` so that ``redact`` masks it; each line of a multi-line secret (a PEM key) too."""
    if not secret:
        return
    for part in (secret, *secret.splitlines()):
        part = part.strip()
        if len(part) >= MIN_REDACTED_LENGTH and not part.startswith("-----"):
            _known.add(part)


def redact(text: str) -> str:
    """``text`` with every registered secret and every password in a URL replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['at']}", text)
    text = _QUERY_SECRET.sub(lambda m: f"{m['head']}{REDACTED}", text)
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_url(url: str) -> str:
    """A URL as it may be shown: the password and any ``password=`` query parameter masked."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            name = user.partition(":")[0]
            netloc = f"{name}:{REDACTED}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            masked = [(k, REDACTED if _SENSITIVE_SETTING.search(k) else v) for k, v in pairs]
            query = urlencode(masked, safe="*/:")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # not even a URL: mask what looks like one inside it
        return redact(url)


def from_env(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``name``, or the contents of the file ``name_FILE`` names (one trailing newline
    dropped); None if neither is set. The value is registered as a secret."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    path = env.get(f"{name}_FILE")
    if value is not None and path is not None:
        raise SecretError(f"set {name} or {name}_FILE, not both")
    if path is not None:
        try:
            value = Path(path).read_text()
        except OSError as exc:
            raise SecretError(f"cannot read {name}_FILE ({path}): {exc.strerror}") from None
        except UnicodeDecodeError:
            raise SecretError(f"{name}_FILE ({path}) is not UTF-8 text") from None
        value = value.removesuffix("\n").removesuffix("\r")
    register(value)
    return value


def kafka_settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The librdkafka settings given in the environment (KAFKA_ENV), secrets registered."""
    out: dict[str, str] = {}
    for name, setting in KAFKA_ENV.items():
        value = from_env(name, environ)
        if value is not None:
            out[setting] = value
    return out


def register_kafka_settings(settings: Mapping[str, Any]) -> None:
    """Register the secret values among librdkafka settings (from a config file's ``kafka`` section)."""
    for name, value in settings.items():
        if isinstance(value, str) and _SENSITIVE_SETTING.search(name):
            register(value)


def redis_credentials(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``username``/``password`` keyword arguments for a Redis client, from the environment."""
    out = {}
    for key, name in (("username", REDIS_USERNAME_ENV), ("password", REDIS_PASSWORD_ENV)):
        value = from_env(name, environ)
        if value is not None:
            out[key] = value
    return out


class RedactingFilter(logging.Filter):
    """Masks secrets in a log record's final message (after %-formatting) and its exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Put a RedactingFilter on every handler of ``logger`` (default: the root logger), where records
    propagated from every library's logger pass."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
