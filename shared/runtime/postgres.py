"""The PostgreSQL results sink: each key's latest result upserted, numeric results kept for charts.

``ivmstream_results`` holds one row per (view, key). A row is replaced only by a result covering later
input offsets (``REPLACE_IF_LATER``), so the results published again after a crash, which reflect
offsets the table already covers, change nothing. ``ivmstream_result_history`` keeps, for every row
that changed, the result's numeric leaves (one row per JSON Pointer path), pruned past a retention
period: what Grafana charts over time.

The worker hands each batch's records to the sink and goes on; a writer thread coalesces them per key
and writes them in one transaction at most once per ``flush_interval`` (sooner once ``batch_rows``
are waiting or a ``flush`` asks), which also notifies ``CHANNEL`` listeners (``ivmstream serve``).
A periodic checkpoint does not wait for PostgreSQL (the apply loop would stall for a write); instead a
restored partition publishes again every key whose row is missing or differs from its checkpointed
result (``stale``), so a crash loses no result. A revocation or a shutdown waits until everything
handed to the sink is written (``flush``). While PostgreSQL is unreachable each write is retried as
Redis writes are (0.1 s doubling to 2 s, for up to ``retry_seconds``); past that the sink fails and
the worker stops at its next checkpoint, from where a restart publishes the lost results again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg

from ivmstream.config import ServiceConfig
from ivmstream.postgres_client import PostgresUnavailable, connect, shown
from ivmstream.retry import with_retries

log = logging.getLogger("ivmstream.runtime")

RESULTS_TABLE = "ivmstream_results"
HISTORY_TABLE = "ivmstream_result_history"
CHANNEL = "ivmstream_results"  # NOTIFY payload: {"service": view, "keys": [...]}
NOTIFY_MAX_BYTES = 7000  # PostgreSQL refuses payloads of 8000 bytes or more

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {RESULTS_TABLE} (
    service text NOT NULL,
    key text NOT NULL,
    result jsonb NOT NULL,
    offsets jsonb NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (service, key)
);
CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
    service text NOT NULL,
    key text NOT NULL,
    path text NOT NULL,
    value double precision NOT NULL,
    offsets jsonb NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {HISTORY_TABLE}_key_at ON {HISTORY_TABLE} (service, key, path, at);
CREATE INDEX IF NOT EXISTS {HISTORY_TABLE}_path_at ON {HISTORY_TABLE} (service, path, at);
CREATE INDEX IF NOT EXISTS {HISTORY_TABLE}_at ON {HISTORY_TABLE} (service, at);
"""

# ``new`` covers later input than ``old``: no partition of ``old`` is ahead in ``new``, and some
# partition of ``new`` is past ``old`` (or unknown to it). Equal offsets replace nothing.
REPLACE_IF_LATER = f"""
NOT EXISTS (SELECT 1 FROM jsonb_each_text({RESULTS_TABLE}.offsets) AS o(part, n)
            WHERE (EXCLUDED.offsets ->> o.part)::bigint < o.n::bigint)
AND EXISTS (SELECT 1 FROM jsonb_each_text(EXCLUDED.offsets) AS e(part, n)
            WHERE ({RESULTS_TABLE}.offsets ->> e.part) IS NULL
               OR e.n::bigint > ({RESULTS_TABLE}.offsets ->> e.part)::bigint)
"""

UPSERT = f"""
INSERT INTO {RESULTS_TABLE} AS r (service, key, result, offsets, updated_at)
SELECT %s, k, res, off, to_timestamp(at)
FROM unnest(%s::text[], %s::jsonb[], %s::jsonb[], %s::float8[]) AS u(k, res, off, at)
ON CONFLICT (service, key) DO UPDATE
SET result = EXCLUDED.result, offsets = EXCLUDED.offsets, updated_at = EXCLUDED.updated_at
WHERE {REPLACE_IF_LATER.replace(f"{RESULTS_TABLE}.", "r.")}
RETURNING key
"""

# History rows are added only for rows the upsert changed, so a result published again (same offsets)
# adds none: the table needs no unique key, and COPY (the cheapest insert) can fill it.
HISTORY_COPY = f"COPY {HISTORY_TABLE} (service, key, path, value, offsets, at) FROM STDIN"

# Keys whose row is missing or holds another result than the one given (jsonb equality: by value).
STALE = f"""
SELECT k FROM unnest(%s::text[], %s::jsonb[]) AS u(k, res)
WHERE NOT EXISTS (SELECT 1 FROM {RESULTS_TABLE} r WHERE r.service = %s AND r.key = k AND r.result = res)
"""

PRUNE = f"DELETE FROM {HISTORY_TABLE} WHERE service = %s AND at < now() - make_interval(secs => %s)"

_UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError, PostgresUnavailable)


class SinkFailed(RuntimeError):
    """The sink gave up (PostgreSQL unreachable past the retry budget, or a write refused)."""


def view_name(output_topic: str) -> str:
    """The name results are kept under: the output topic without its ``.results`` suffix (``vwap``
    for ``vwap.results``), so two instances of a service with their own topics never share rows."""
    return output_topic.removesuffix(".results") or output_topic


def numeric_leaves(result: Any, limit: int, path: str = "") -> Iterator[tuple[str, float]]:
    """The finite numbers in ``result`` with their JSON Pointer paths (``""`` for a bare number), at most
    ``limit`` of them, shallowest first (a result's headline numbers before the members of its lists),
    in document order at each depth; booleans are not numbers here."""
    level: list[tuple[str, Any]] = [(path, result)]
    n = 0
    while level:
        deeper: list[tuple[str, Any]] = []
        for where, value in level:
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, int | float):
                number = float(value)
                if math.isfinite(number):
                    yield where, number
                    n += 1
                    if n == limit:
                        return
            elif isinstance(value, dict):
                deeper += [(f"{where}/{_escape(str(k))}", v) for k, v in value.items()]
            elif isinstance(value, list):
                deeper += [(f"{where}/{i}", v) for i, v in enumerate(value)]
        level = deeper


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables and indexes if missing, under an advisory lock (workers start together)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(RESULTS_TABLE.encode()),))
        conn.execute(SCHEMA)


class PostgresSink:
    """Writes the records handed to ``submit`` from a thread of its own; see the module's text."""

    def __init__(
        self,
        dsn: str,
        view: str,
        *,
        history_retention: float | None = 7 * 86400.0,
        history_fields: int = 64,
        flush_interval: float = 0.5,
        batch_rows: int = 5000,
        retry_seconds: float = 30.0,
        connect_to: Callable[[str], psycopg.Connection[Any]] = connect,
    ) -> None:
        """``history_retention``: seconds of history kept (None: all; 0: no history);
        ``history_fields``: the most numeric leaves of one result kept in the history."""
        self.dsn, self.view = dsn, view
        self.history_retention = history_retention
        self.history_fields = history_fields
        self.flush_interval = flush_interval
        self.batch_rows = batch_rows
        self.retry_seconds = retry_seconds
        self._connect_to = connect_to
        self._conn = connect_to(dsn)  # fails at start, in one line, when PostgreSQL cannot be reached
        ensure_schema(self._conn)
        self._lock = threading.Condition()
        self._pending: dict[str, dict[str, Any]] = {}
        self._submitted = 0  # submit calls so far (each one a generation)
        self._written = 0  # the generation the table holds everything of
        self._error: str | None = None
        self._closing = False
        self._flush_target = 0  # the generation a waiting flush needs: write it now, not at the interval
        self._last_prune = 0.0
        self.rows_written = 0
        self.rows_refused = 0
        self._thread = threading.Thread(target=self._run, name=f"postgres-sink-{view}", daemon=True)
        self._thread.start()

    # --- the worker's side ------------------------------------------------------------------------

    def submit(self, records: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Queue (key, published record) pairs; a key's later record replaces its queued one."""
        with self._lock:
            if self._error is not None:
                raise SinkFailed(self._error)
            self._pending.update(records)
            self._submitted += 1
            if len(self._pending) >= self.batch_rows:
                self._lock.notify_all()

    def check(self) -> None:
        """Raise ``SinkFailed`` if the writer gave up (a periodic checkpoint's test: it does not wait)."""
        with self._lock:
            if self._error is not None:
                raise SinkFailed(self._error)

    def flush(self, timeout: float | None = None, check: Callable[[], None] | None = None) -> None:
        """Wait until everything submitted so far is written; raise ``SinkFailed`` if it cannot be."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._submitted
            self._flush_target = max(self._flush_target, target)
            self._lock.notify_all()
            while self._written < target and self._error is None:
                self._lock.wait(1.0)
                if check is not None:
                    check()
                if deadline is not None and time.monotonic() > deadline:
                    raise SinkFailed(f"PostgreSQL results not written within {timeout}s")
            if self._error is not None:
                raise SinkFailed(self._error)

    def close(self) -> None:
        """Write what is queued (best effort), then stop the writer and close the connection."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        self._thread.join(self.retry_seconds + 10)
        self._conn.close()

    def stale(self, keys: list[str], result_of: Callable[[str], Any], chunk: int = 1000) -> list[str]:
        """The keys among ``keys`` whose row is missing or holds another result than ``result_of(key)``
        (a connection of its own: the writer's is busy). A restored partition publishes these again:
        the checkpoint it restored may cover results the sink had not written when the worker died."""
        stale: list[str] = []
        with self._connect_to(self.dsn) as conn:
            for i in range(0, len(keys), chunk):
                part = keys[i : i + chunk]
                results = [orjson.dumps(result_of(k)).decode() for k in part]

                def read(part: list[str] = part, results: list[str] = results) -> list[str]:
                    nonlocal conn
                    if conn.closed or conn.broken:
                        conn = self._connect_to(self.dsn)
                    return [row[0] for row in conn.execute(STALE, (part, results, self.view)).fetchall()]

                stale += with_retries(
                    read, what="read PostgreSQL", retry_on=_UNREACHABLE, give_up_after=self.retry_seconds
                )[0]
        return stale

    # --- the writer thread ------------------------------------------------------------------------

    def _run(self) -> None:
        """Write at most once per ``flush_interval`` (each key's latest record), sooner when asked or
        when ``batch_rows`` keys wait: fewer, larger writes cost PostgreSQL and the worker less."""
        last = 0.0
        while True:
            with self._lock:
                while not (
                    self._closing
                    or self._flush_target > self._written
                    or len(self._pending) >= self.batch_rows
                ):
                    left = last + self.flush_interval - time.monotonic()
                    if left <= 0 and self._pending:
                        break
                    self._lock.wait(left if left > 0 else self.flush_interval)
                if not self._pending:  # nothing taken and not written: everything submitted is written
                    self._written = self._submitted
                    self._lock.notify_all()
                    if self._closing:
                        return
                    continue
                batch, self._pending = self._pending, {}
                generation = self._submitted
            last = time.monotonic()
            try:
                self._write_batch(batch)
            except Exception as exc:  # the worker stops at its next flush; a restart publishes again
                with self._lock:
                    self._error = f"cannot write results to PostgreSQL at {shown(self.dsn)}: {_line(exc)}"
                    self._lock.notify_all()
                log.error("%s", self._error)
                return
            with self._lock:
                self._written = max(self._written, generation)
                self._lock.notify_all()

    def _write(self, batch: dict[str, dict[str, Any]]) -> None:
        keys = list(batch)
        results = [orjson.dumps(batch[k]["result"]).decode() for k in keys]
        offsets = [orjson.dumps(batch[k]["offsets"]).decode() for k in keys]
        ats = [float(batch[k].get("published_at") or time.time()) for k in keys]

        def write() -> None:
            if self._conn.closed or self._conn.broken:
                self._conn = self._connect_to(self.dsn)
            with self._conn.transaction():
                changed = self._upsert(keys, results, offsets, ats)
                if changed and self.history_retention != 0:
                    self._history(batch, changed)
                if changed:
                    self._notify(changed)
                self._prune()

        self._retried(write)
        self.rows_written += len(keys)

    def _retried(self, call: Callable[[], None]) -> None:
        with_retries(
            call, what="write results to PostgreSQL", retry_on=_UNREACHABLE, give_up_after=self.retry_seconds
        )

    def _write_batch(self, batch: dict[str, dict[str, Any]]) -> None:
        """``batch`` in one transaction; if PostgreSQL refuses a value in it (a NUL character), each
        record on its own, skipping and logging those it refuses: one result it cannot hold must not
        stop the others."""
        try:
            self._write(batch)
        except psycopg.DataError as exc:
            if len(batch) > 1:
                for key, record in batch.items():
                    self._write_batch({key: record})
                return
            self.rows_refused += 1
            log.warning("%s: result of key %r not written to PostgreSQL: %s", self.view, *batch, _line(exc))

    def _upsert(self, keys: list[str], results: list[str], offsets: list[str], ats: list[float]) -> list[str]:
        changed: list[str] = []
        with self._conn.cursor() as cur:
            for i in range(0, len(keys), self.batch_rows):
                part = slice(i, i + self.batch_rows)
                cur.execute(UPSERT, (self.view, keys[part], results[part], offsets[part], ats[part]))
                changed += [row[0] for row in cur.fetchall()]
        return changed

    def _history(self, batch: dict[str, dict[str, Any]], changed: list[str]) -> None:
        """The changed rows' numbers, COPYed in (text format: one line per number)."""
        with self._conn.cursor() as cur, cur.copy(HISTORY_COPY) as copy:
            view = _copy_text(self.view)
            for key in changed:
                record = batch[key]
                prefix = f"{view}\t{_copy_text(key)}\t"
                covered = _copy_text(orjson.dumps(record["offsets"]).decode())
                at = _timestamp(float(record.get("published_at") or time.time()))
                suffix = f"\t{covered}\t{at}\n"
                lines = [
                    f"{prefix}{_copy_text(path)}\t{value!r}{suffix}"
                    for path, value in numeric_leaves(record["result"], self.history_fields)
                ]
                copy.write("".join(lines))

    def _notify(self, changed: list[str]) -> None:
        """One notification per chunk of changed keys, delivered when the transaction commits."""
        chunk: list[str] = []
        size = 0
        for key in changed:
            if chunk and size + len(key) + 4 > NOTIFY_MAX_BYTES - len(self.view) - 32:
                self._send(chunk)
                chunk, size = [], 0
            chunk.append(key)
            size += len(key.encode()) + 4
        if chunk:
            self._send(chunk)

    def _send(self, keys: list[str]) -> None:
        payload = orjson.dumps({"service": self.view, "keys": keys}).decode()
        if len(payload.encode()) < NOTIFY_MAX_BYTES:
            self._conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    def _prune(self) -> None:
        """Drop history past the retention period, at most once a minute (or per half period)."""
        retention = self.history_retention
        if not retention:
            return
        now = time.monotonic()
        if now - self._last_prune < min(60.0, retention / 2):
            return
        self._conn.execute(PRUNE, (self.view, retention))
        self._last_prune = now


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """``value`` as one field of COPY's text format."""
    return value.translate(_COPY_ESCAPES)


def _timestamp(epoch: float) -> str:
    """An epoch second as a timestamptz literal PostgreSQL reads without a time zone lookup."""
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__).strip()


def sink_for(dsn: str, config: ServiceConfig) -> PostgresSink:
    """The sink of a configured worker: its rows under the view name of its output topic."""
    return PostgresSink(
        dsn,
        view_name(config.output_topic),
        history_retention=None
        if config.postgres_history_retention is None
        else float(config.postgres_history_retention),
        history_fields=config.postgres_history_fields,
        flush_interval=config.postgres_flush_interval,
    )
