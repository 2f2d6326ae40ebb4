"""The two batch jobs as the CLI, the demo and the SQL front end run them: each picks the path for its
view, one input topic (``ivmstream.spark.jobs``), a keyless view over ``inputs``
(``ivmstream.spark.inputs``, which builds on the former) or a keyed view over inputs fed through
``ivmstream rekey`` (``ivmstream.spark.rekeyed``: ``step_store`` holds the step's state)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from ivmstream.config import ServiceConfig
from ivmstream.service import ServiceDefinition
from ivmstream.spark.inputs import RelationsOf, bootstrap_inputs, reconcile_inputs
from ivmstream.spark.jobs import (
    BatchError,
    BootstrapReport,
    ReconcileReport,
    bootstrap_topic,
    reconcile_topic,
    refuse_sharded,
)
from ivmstream.spark.rekeyed import bootstrap_rekeyed, reconcile_rekeyed
from ivmstream.state import StateStore


def run_bootstrap(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    snapshot: str | None,
    store: StateStore,
    *,
    bootstrap_servers: str | None = None,
    from_offsets: str = "latest",
    partitions: int = 1,
    step_store: StateStore | None = None,
    relations_of: RelationsOf | None = None,
) -> BootstrapReport:
    """Write the engine states a snapshot (and, for a view over inputs, its topics) give, with the
    offsets the workers resume from, in one checkpoint per partition (``relations_of``: for a view over
    inputs, the service's relations from the inputs' net bags)."""
    refuse_sharded(config)
    if config.rekeyed:
        if step_store is None:
            raise BatchError(f"{config.source}: a re-keyed view's bootstrap also writes its step's state")
        rekeyed: BootstrapReport = bootstrap_rekeyed(
            spark,
            service,
            config,
            snapshot,
            store,
            step_store,
            bootstrap_servers=bootstrap_servers,
            from_offsets=from_offsets,
        )
        return rekeyed
    if config.inputs:
        report: BootstrapReport = bootstrap_inputs(
            spark,
            service,
            config,
            snapshot,
            store,
            bootstrap_servers=bootstrap_servers,
            from_offsets=from_offsets,
            relations_of=relations_of,
        )
        return report
    return bootstrap_topic(
        spark,
        service,
        config,
        snapshot,
        store,
        bootstrap_servers=bootstrap_servers,
        from_offsets=from_offsets,
        partitions=partitions,
    )


def run_reconcile(
    spark: SparkSession,
    service: ServiceDefinition,
    config: ServiceConfig,
    bootstrap_servers: str,
    redis_client: Any,
    *,
    snapshot: str | None = None,
    from_offsets: str = "earliest",
) -> ReconcileReport:
    """Recompute every published key's result at exactly the offsets it reflects, and compare."""
    refuse_sharded(config)
    if config.rekeyed:
        rekeyed: ReconcileReport = reconcile_rekeyed(
            spark,
            service,
            config,
            bootstrap_servers,
            redis_client,
            snapshot=snapshot,
            from_offsets=from_offsets,
        )
        return rekeyed
    if config.inputs:
        report: ReconcileReport = reconcile_inputs(
            spark,
            service,
            config,
            bootstrap_servers,
            redis_client,
            snapshot=snapshot,
            from_offsets=from_offsets,
        )
        return report
    return reconcile_topic(
        spark,
        service,
        config,
        bootstrap_servers,
        redis_client,
        snapshot=snapshot,
        from_offsets=from_offsets,
    )
