"""Generators of the deployment artifacts (docker/compose.yaml, the Helm chart's service files, the
Grafana dashboards) from the services' declarations: ``python -m deploy`` rewrites them, ``--check``
says which are stale."""
