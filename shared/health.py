"""Liveness and readiness of a worker, served next to its metrics as ``/healthz`` and ``/readyz``.

Orchestrators (Docker's HEALTHCHECK, Kubernetes probes) restart a worker that is not alive and route
rollouts around one that is not ready. The worker reports its phase at rebalances and stamps
``last_beat`` once per consume-loop iteration (one attribute store: the hot loop pays nothing else);
the HTTP handler judges them at request time.

- alive: not failed, and a worker that is consuming has come around its loop within ``stall_after``
  seconds (restoring a large state in a rebalance callback is alive, however long it takes);
- ready: its assigned partitions are restored and its loop is consuming them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import orjson
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

STARTING, RESTORING, CONSUMING, STOPPING, FAILED = "starting", "restoring", "consuming", "stopping", "failed"


class Health:
    def __init__(self, stall_after: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        """``stall_after``: seconds without a loop iteration after which a consuming worker is not alive
        (a batch plus a checkpoint must fit in it)."""
        self.stall_after = stall_after
        self.clock = clock
        self.phase = STARTING
        self.partitions = 0
        self.last_beat = clock()
        self._assigned_at = self.last_beat

    # --- reported by the worker -------------------------------------------------------------------

    def restoring(self) -> None:
        self.phase = RESTORING

    def consuming(self, partitions: int) -> None:
        """A rebalance finished: ``partitions`` are restored (none is fine: more workers than partitions)."""
        self.partitions = partitions
        self._assigned_at = self.clock()
        self.phase = CONSUMING

    def rebalancing(self) -> None:
        """Partitions were revoked or lost: not ready until the group assigns again."""
        self.phase = STARTING

    def stopping(self) -> None:
        self.phase = STOPPING

    def failed(self) -> None:
        self.phase = FAILED

    # --- judged per request -----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = self.clock()
        since_beat = now - self.last_beat
        stalled = self.phase == CONSUMING and since_beat > self.stall_after
        alive = self.phase != FAILED and not stalled
        # ready once the loop has come around after the assignment: the restored partitions are polled
        ready = alive and self.phase == CONSUMING and self.last_beat >= self._assigned_at
        return {
            "alive": alive,
            "ready": ready,
            "phase": self.phase,
            "partitions": self.partitions,
            "seconds_since_loop": round(since_beat, 3),
            "stall_after": self.stall_after,
        }


def health_app(registry: CollectorRegistry, health: Health) -> Callable[..., Iterable[bytes]]:
    """One WSGI app: ``/healthz`` and ``/readyz`` (200 or 503 with the status as JSON), else the
    Prometheus exposition (``/metrics``, as prometheus_client serves it on any path)."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path not in ("/healthz", "/readyz"):
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        status = health.status()
        ok = status["alive"] if path == "/healthz" else status["ready"]
        body = orjson.dumps(status)
        start_response(
            "200 OK" if ok else "503 Service Unavailable",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: no access log
        pass


def serve(
    registry: CollectorRegistry, health: Health, port: int, addr: str = "0.0.0.0"
) -> ThreadingWSGIServer:
    """Serve metrics and probes on ``addr:port`` from a daemon thread; returns the server to shut down."""
    app = health_app(registry, health)
    server = make_server(addr, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
