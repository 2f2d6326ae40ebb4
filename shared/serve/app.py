"""The HTTP results API: point lookups, key listings, history and server-sent events of changes.

Every view's published results, by the view's name (its output topic without ``.results``). Lookups
and subscriptions read the first source given (Redis, fresher: written with every batch, before
PostgreSQL's next write); the history comes from PostgreSQL. Errors are JSON ``{"error": ...}``. With
a token, every ``/v1`` request needs ``Authorization: Bearer <token>``; ``/healthz`` and the OpenAPI
document stay open.
"""

# No ``from __future__ import annotations``: FastAPI reads the handlers' annotations at run time,
# and those naming local dependencies cannot be resolved from strings.
import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel

from ivmstream.serve.hub import LAGGING, Hub
from ivmstream.serve.sources import PostgresSource, ResultSource

API_VERSION = "1"


class ResultRecord(BaseModel):
    """A key's latest result and the input it reflects (offsets are exclusive ends per partition)."""

    service: str
    key: str
    result: Any
    offsets: dict[str, int]
    published_at: float


class KeyList(BaseModel):
    service: str
    keys: list[str]


class ServiceList(BaseModel):
    services: list[str]


class HistoryPoint(BaseModel):
    at: float
    path: str
    value: float
    offsets: dict[str, int]


class History(BaseModel):
    service: str
    key: str
    points: list[HistoryPoint]


class Error(BaseModel):
    error: str


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Error, "description": "missing or wrong bearer token"},
    404: {"model": Error, "description": "unknown service or key"},
}


def create_app(
    source: ResultSource, *, history: PostgresSource | None = None, token: str | None = None
) -> FastAPI:
    """The API over ``source`` (lookups, subscriptions) and ``history`` (PostgreSQL, if given)."""
    hub = Hub(source)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        hub.start()
        try:
            yield
        finally:
            await hub.stop()
            await source.close()
            if history is not None and history is not source:
                await history.close()

    app = FastAPI(
        title="ivmstream results",
        version=API_VERSION,
        summary="The published results of every ivmstream view: lookups, listings, history and changes.",
        lifespan=lifespan,
    )
    app.state.hub = hub
    bearer = HTTPBearer(auto_error=False, description="the token given to `ivmstream serve`")

    def authorized(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        if token is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ApiError(401, "a valid bearer token is required")

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=headers)

    async def known_keys(service: str) -> list[str]:
        keys = await source.keys(service)
        if keys is None:
            raise ApiError(404, f"no results of service {service!r}")
        return keys

    async def existing(service: str) -> None:
        """Checked before a stream starts: once it has, its status is sent."""
        await known_keys(service)

    guarded = [Depends(authorized)]

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/services", dependencies=guarded, responses=_ERRORS)
    async def services() -> ServiceList:
        """Every view with published results."""
        return ServiceList(services=await source.views())

    @app.get("/v1/{service}/results", dependencies=guarded, responses=_ERRORS)
    async def results(service: str) -> KeyList:
        """Every key of a view that has a result."""
        return KeyList(service=service, keys=await known_keys(service))

    @app.get("/v1/{service}/results/{key:path}", dependencies=guarded, responses=_ERRORS)
    async def result(service: str, key: str) -> ResultRecord:
        """A key's latest result, with the input offsets it reflects."""
        record = await source.get(service, key)
        if record is None:
            await known_keys(service)
            raise ApiError(404, f"no result of key {key!r} in service {service!r}")
        return ResultRecord.model_validate(record)

    @app.get("/v1/{service}/history/{key:path}", dependencies=guarded, responses=_ERRORS)
    async def key_history(
        service: str,
        key: str,
        path: Annotated[str | None, Query(description="one JSON Pointer into the result, e.g. /vwap")] = None,
        since: Annotated[float | None, Query(description="seconds since the epoch")] = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
    ) -> History:
        """A key's numeric results over time (PostgreSQL's history; the newest ``limit`` points)."""
        if history is None:
            raise ApiError(404, "no history: serve was started without --postgres")
        points = await history.history(service, key, path, since, limit)
        if not points and await history.get(service, key) is None:
            raise ApiError(404, f"no result of key {key!r} in service {service!r}")
        return History(service=service, key=key, points=[HistoryPoint.model_validate(p) for p in points])

    @app.get(
        "/v1/{service}/subscribe",
        dependencies=[*guarded, Depends(existing)],
        responses=_ERRORS,
        response_class=EventSourceResponse,
    )
    async def subscribe(
        service: str,
        key: Annotated[str | None, Query(description="only this key's changes")] = None,
    ) -> AsyncIterator[ServerSentEvent]:
        """Server-sent events, one ``result`` event per result change (its data a result record, its
        id the offsets it reflects); an ``error`` event ends a subscriber that fell behind."""
        await hub.ready.wait()
        sub = hub.subscribe(service, key)
        try:
            while True:
                record = await sub.queue.get()
                if record is LAGGING:
                    yield ServerSentEvent(event="error", data=record)
                    return
                yield ServerSentEvent(event="result", id=_event_id(record), data=record)
        finally:
            hub.unsubscribe(sub)

    return app


def _event_id(record: dict[str, Any]) -> str:
    offsets = record.get("offsets") or {}
    return f"{record.get('key', '')}@" + ",".join(f"{p}={n}" for p, n in sorted(offsets.items()))
