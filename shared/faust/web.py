"""Results over a Faust app's own web server: interactive queries of a view without another service.

``GET {base}/{service}/{key}`` answers a key's latest result as published (the record with the
offsets it reflects); ``GET {base}/{service}`` lists the keys this worker owns. A key whose partition
another worker owns is not here (404): ask Redis (``ivmstream results``) or that worker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import faust
from faust.web import Request, Response, View

if TYPE_CHECKING:
    from ivmstream.faust.view import FaustView


def add_results_pages(app: faust.App, view: FaustView, base: str) -> None:
    """Register the view's two pages under ``base`` on ``app``'s web server."""
    prefix = f"{base.rstrip('/')}/{view.service.name}"

    class Keys(View):
        async def get(self, request: Request) -> Response:
            keys = sorted(k for p in view.partitions.values() for k in p.all_keys())
            return self.json({"service": view.service.name, "keys": keys})

    class Result(View):
        async def get(self, request: Request, key: str) -> Response:
            record: dict[str, Any] | None = view.result(key)
            if record is None:
                return self.json({"error": f"no result for key {key!r} on this worker"}, status=404)
            return self.json(record)

    app.page(prefix, name=f"ivmstream-{view.service.name}-keys")(Keys)
    app.page(prefix + "/{key}", name=f"ivmstream-{view.service.name}-result")(Result)
