"""Values for rendering the chart in tests: every option switched on, built from the services that exist."""

from __future__ import annotations

from typing import Any

from deploy.services import deployable_services

K8S_VERSION = "1.32.0"  # the Kubernetes release the manifests are validated against
NAMESPACE = "ivmstream"
RELEASE = "demo"


def all_options() -> dict[str, Any]:
    services = deployable_services()
    batch = [d.name for d in services if d.batch]
    return {
        "image": {
            "repository": "registry.example.com/ivmstream",
            "tag": "0.1.0",
            "digest": "sha256:" + "a" * 64,
        },
        "stateBackend": "redis",
        "kafka": {
            "bootstrap": "kafka-0.kafka:9093,kafka-1.kafka:9093",
            "sasl": {"enabled": True, "existingSecret": "ivmstream-kafka", "mechanism": "SCRAM-SHA-512"},
            "tls": {"caSecret": "kafka-ca"},
        },
        "redis": {"host": "redis", "port": 6380, "db": 2, "existingSecret": "ivmstream-redis"},
        "postgres": {
            "enabled": True,
            "host": "pg",
            "existingSecret": "ivmstream-postgres",
            "sslmode": "require",
        },
        "serve": {"enabled": True, "tokenSecret": "ivmstream-serve"},
        # every service at as many workers as its input topic has partitions, with a config override
        "services": {
            d.name: {"replicas": d.partitions, "config": {"batch_size": 500}, "storage": {"size": "1Gi"}}
            for d in services
        },
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True},
        "dashboards": {"enabled": True},
        "autoscaling": {"enabled": True},
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
            ],
        },
        "bootstrap": {
            "enabled": True,
            "service": batch[0],
            "snapshot": "snapshot.parquet",
            "snapshotClaim": "ivmstream-snapshots",
        },
        "reconcile": {"enabled": True},
    }
