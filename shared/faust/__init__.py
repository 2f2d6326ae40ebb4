"""ivmstream views inside Faust apps: ``attach`` adds a service's view to a user's ``faust.App``.

    app = faust.App("graphs", broker="kafka://localhost:9092")
    view = attach(app, "triangles", {"input_topic": "edges", "output_topic": "triangle-counts"})

The view keeps ivmstream's exactly-once (``ivmstream.faust.view``); its latest results are served on
the app's web server (``ivmstream.faust.web``). See docs/faust.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import faust

from ivmstream.config import ServiceConfig, build_config, load_config
from ivmstream.faust.view import FaustView, kafka_bootstrap
from ivmstream.faust.web import add_results_pages
from ivmstream.service import ServiceDefinition, load_service
from ivmstream.state import StateStore, open_store

__all__ = ["FaustView", "attach", "kafka_bootstrap"]


def attach(
    app: faust.App,
    service: str | ServiceDefinition,
    config: Mapping[str, Any] | str | Path | ServiceConfig | None = None,
    *,
    store: str | StateStore = "rocksdb",
    state_dir: str | Path = "state",
    redis: str | None = None,
    web: str | None = "/ivmstream",
    **kwargs: Any,
) -> FaustView:
    """Add ``service``'s view to ``app``: its input topic consumed by an agent, results published to its
    output topic (and Redis when ``redis`` is a URL), state checkpointed in ``store`` (a backend name:
    rocksdb under ``state_dir``, redis at ``redis``, memory; or a store), the latest result of a key at
    ``GET {web}/{service}/{key}`` on the app's web server (``web`` None: no pages). ``config``: the
    service's config as a mapping, a file, or built; ``kwargs`` go to ``FaustView``."""
    definition = load_service(service) if isinstance(service, str) else service
    if isinstance(config, ServiceConfig):
        built = config
    elif isinstance(config, str | Path):
        built = load_config(definition, config)
    else:
        built = build_config(definition, dict(config or {}), source=f"{definition.name} config")
    redis_client = None
    if redis is not None:
        from ivmstream.redis_client import connect

        redis_client = connect(redis)
    if isinstance(store, str):
        store = open_store(store, f"{definition.name}.{app.conf.id}", state_dir=state_dir, redis_url=redis)
    view = FaustView(app, definition, built, store, redis_client=redis_client, **kwargs)
    if web is not None:
        add_results_pages(app, view, web)
    return view
