"""``ivmstream run SERVICE --runtime faust``: the worker as the one agent of a Faust app of its own.

The app's consumer group is the worker's group; Faust's own metrics join the worker's registry
(``ivmstream_runtime_info{runtime="faust"}`` tells the two runtimes apart), and its web server answers
results (``ivmstream.faust.web``)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import faust

from ivmstream.config import ServiceConfig
from ivmstream.faust.kafka import broker_credentials, use_runtime_transport
from ivmstream.faust.sensors import export_faust_metrics
from ivmstream.faust.view import FaustView
from ivmstream.faust.web import add_results_pages
from ivmstream.metrics import RuntimeMetrics
from ivmstream.runtime.hooks import Hooks
from ivmstream.runtime.kafka import consumer_settings
from ivmstream.service import ServiceDefinition
from ivmstream.state import StateStore

log = logging.getLogger("ivmstream.faust")


def faust_app(group: str, bootstrap: str, config: ServiceConfig, web_port: int | None) -> faust.App:
    """A Faust app for one worker: its topics are the operator's (Faust declares none), offsets are
    committed as often as ivmstream checkpoints, a new group reads from the start of the log, and its
    consumer is the default runtime's as far as aiokafka allows (``ivmstream.faust.kafka``): the same
    security settings, isolation level and fetch wait."""
    settings = consumer_settings(
        bootstrap, group, config.session_timeout_ms, config.kafka.get("consumer", {})
    )
    app = faust.App(
        group,
        broker=[f"kafka://{host}" for host in bootstrap.split(",")],
        broker_credentials=broker_credentials(settings),
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=config.session_timeout_ms / 1000,
        broker_heartbeat_interval=max(0.1, config.session_timeout_ms / 5000),
        broker_commit_interval=max(0.2, config.checkpoint_interval),
        web_enabled=web_port is not None,
        web_port=web_port or 6066,
        web_bind="0.0.0.0",
    )
    use_runtime_transport(app)
    return app


def faust_worker(
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap: str,
    store: StateStore,
    *,
    group: str,
    metrics: RuntimeMetrics,
    redis_client: Any = None,
    web_port: int | None = None,
    postgres: Any = None,
    hooks: Hooks | None = None,
    silent_relation_after: int | None = 100_000,
) -> FaustView:
    """The app and its view as ``ivmstream run --runtime faust`` runs them (``execute`` runs them);
    ``hooks``: the view's, for a benchmark or a test to attach to before it starts."""
    app = faust_app(group, bootstrap, config, web_port)
    export_faust_metrics(app, metrics.registry, "/faust/metrics" if web_port is not None else None)
    view = FaustView(
        app,
        service,
        config,
        store,
        bootstrap=bootstrap,
        redis_client=redis_client,
        metrics=metrics,
        postgres=postgres,
        hooks=hooks,
        silent_relation_after=silent_relation_after,
    )
    if web_port is not None:
        add_results_pages(app, view, "/ivmstream")
    return view


def execute(view: FaustView) -> None:
    """Run ``view``'s app as a Faust worker until a signal (or ``view.app``'s stop) ends it; raises what
    stopped the view if it failed. The process's logging stays ivmstream's: Faust's and mode's own
    loggers only speak at debug level, so a failure ends in ivmstream's one line, not in Faust's
    tracebacks."""
    if not logging.getLogger("ivmstream").isEnabledFor(logging.DEBUG):
        for name in ("faust", "mode", "aiokafka"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    worker = faust.Worker(view.app, quiet=True, redirect_stdouts=False, override_logging=False)
    with contextlib.suppress(SystemExit):  # the Faust worker exits the process when it stops
        worker.execute_from_commandline()
    if view.failed is not None:
        raise view.failed
    crashed = worker.crash_reason or view.app.crash_reason
    if crashed is not None:  # one of Faust's own services (its fetcher, its producer) crashed
        raise FaustStopped(f"Faust stopped: {type(crashed).__name__}: {crashed}") from crashed


class FaustStopped(RuntimeError):
    """Faust itself stopped with an error (not the view): its exit would otherwise look clean."""


def run_faust(
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap: str,
    store: StateStore,
    *,
    group: str,
    metrics: RuntimeMetrics,
    redis_client: Any = None,
    web_port: int | None = None,
    postgres: Any = None,
    silent_relation_after: int | None = 100_000,
) -> None:
    """Run until a signal stops the app; raises what stopped the view if it failed."""
    execute(
        faust_worker(
            service,
            config,
            bootstrap,
            store,
            group=group,
            metrics=metrics,
            redis_client=redis_client,
            web_port=web_port,
            postgres=postgres,
            silent_relation_after=silent_relation_after,
        )
    )
