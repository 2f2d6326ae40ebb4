"""The two batch jobs as the CLI, the demo and the SQL front end run them: each picks the path for its
view, one input topic (``ivmstream.spark.jobs``) or a keyless view over ``inputs``
(``ivmstream.spark.inputs``, which builds on the former)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from ivmstream.config import ServiceConfig
from ivmstream.service import ServiceDefinition
from ivmstream.spark.inputs import RelationsOf, bootstrap_inputs, reconcile_inputs
from ivmstream.spark.jobs import (
    BootstrapReport,
    ReconcileReport,
    bootstrap_topic,
    reconcile_topic,
    refuse_sharded,
)
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
    relations_of: RelationsOf | None = None,
) -> BootstrapReport:
    """Write the engine states a snapshot (and, for a view over inputs, its topics) give, with the
    offsets the workers resume from, in one checkpoint per partition (``relations_of``: for a view over
    inputs, the service's relations from the inputs' net bags)."""
    refuse_sharded(config)
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
