"""charts/ivmstream rendered and linted by Helm's own Go SDK (helm-python-sdk), every manifest validated
by kubernetes-validate against a pinned Kubernetes release, the PrometheusRule's rules by promtool, a
security scan by checkov whose every finding is justified in values.yaml, and the values schema and
template checks refusing bad values with their message."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from chart_values import K8S_VERSION, NAMESPACE, RELEASE, all_options
from deploy_tools import REPO, parse_cli, read_by_the_code, run_tool, tool
from prometheus_client import CollectorRegistry

from deploy.services import METRICS_PORT, deployable_services
from ivmstream.config import build_config
from ivmstream.health import Health, health_app
from ivmstream.service import available_services, load_service

CHART = REPO / "charts" / "ivmstream"


def render(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(values or {})
        files = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in files.items():
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


@pytest.fixture(scope="module")
def default_docs() -> list[dict[str, Any]]:
    return render(None)


@pytest.fixture(scope="module")
def full_docs() -> list[dict[str, Any]]:
    return render(all_options())


def _kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _pod_specs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    specs = []
    for d in docs:
        if d["kind"] in ("StatefulSet", "Deployment", "Job"):
            specs.append(d["spec"]["template"]["spec"])
        elif d["kind"] == "CronJob":
            specs.append(d["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return specs


def _deployed() -> set[str]:
    return {n for n in available_services() if not load_service(n).platform_only}


def test_helm_lint_strict_finds_no_warning():
    for values in (None, all_options()):
        report = helm.lint(str(CHART), values, strict=True, kube_version=f"v{K8S_VERSION}")
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize("which", ["default", "full"])
def test_manifests_are_valid_kubernetes(which, default_docs, full_docs):
    docs = default_docs if which == "default" else full_docs
    custom = []
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            custom.append(doc)  # Prometheus Operator CRDs: checked below
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert (custom == []) == (which == "default")


def test_one_workload_per_service_with_probes_on_the_health_endpoints(default_docs, full_docs):
    for docs, kind in ((default_docs, "StatefulSet"), (full_docs, "Deployment")):
        workloads = {n: w for n, w in _kind(docs, kind).items() if not n.endswith("-serve")}
        assert {
            w["metadata"]["labels"]["app.kubernetes.io/component"] for w in workloads.values()
        } == _deployed()
        for w in workloads.values():
            [container] = w["spec"]["template"]["spec"]["containers"]
            assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert container["ports"] == [{"name": "metrics", "containerPort": METRICS_PORT}]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            if kind == "StatefulSet":
                assert w["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state"
    # the probe paths are the ones the worker's endpoint answers (others are the metrics exposition)
    app = health_app(CollectorRegistry(), Health())
    for path, status in (("/healthz", "200 OK"), ("/readyz", "503 Service Unavailable")):
        seen = []
        app({"PATH_INFO": path}, lambda s, _h, seen=seen: seen.append(s))
        assert seen == [status]


def test_every_container_command_is_a_real_cli_invocation(full_docs):
    configmaps = _kind(full_docs, "ConfigMap")
    seen = set()
    for spec in _pod_specs(full_docs):
        [container] = spec["containers"]
        args = parse_cli(container["args"])
        if args.command == "serve":  # the results API: no service of its own
            assert (
                args.redis == "redis://redis:6380/2"
                and args.postgres == "postgresql://ivmstream@pg:5432/ivmstream?sslmode=require"
            )
            continue
        seen.add((args.command, args.service))
        assert (
            args.command != "run"
            or args.postgres == "postgresql://ivmstream@pg:5432/ivmstream?sslmode=require"
        )
        service = load_service(args.service)
        volume = next(v for v in spec["volumes"] if v["name"] == "config")
        data = yaml.safe_load(configmaps[volume["configMap"]["name"]]["data"]["config.yaml"])
        build_config(service, data)  # the ConfigMap holds a config the service accepts
        assert data["batch_size"] == 500  # values' override merged over the generated config
        assert args.redis == "redis://redis:6380/2"  # no credentials in the argument
        assert args.config == "/etc/ivmstream/config.yaml"
    batch = {d.name for d in deployable_services() if d.batch}
    assert {s for c, s in seen if c == "run"} == _deployed()
    assert {s for c, s in seen if c == "reconcile"} == batch
    assert len([c for c, _ in seen if c == "bootstrap"]) == 1


def test_secrets_are_referenced_never_inlined(full_docs):
    """Credentials are Secret volumes whose files the IVMSTREAM_*_FILE variables name."""
    assert _kind(full_docs, "Secret") == {}
    for spec in _pod_specs(full_docs):
        [container] = spec["containers"]
        serve = container["name"] == "serve"
        volumes = {v["name"]: v for v in spec["volumes"] if "secret" in v}
        assert {v["secret"]["secretName"] for v in volumes.values()} == {
            "ivmstream-redis",
            "ivmstream-postgres",
            "ivmstream-kafka",
            "kafka-ca",
        } | ({"ivmstream-serve"} if serve else set())
        mounts = {m["mountPath"]: m for m in container["volumeMounts"] if m["name"] in volumes}
        assert all(m["readOnly"] for m in mounts.values())
        files = {
            e["name"]: e["value"] for e in container["env"] if e["name"].endswith(("_FILE", "_LOCATION"))
        }
        assert set(files) == {
            "IVMSTREAM_REDIS_PASSWORD_FILE",
            "IVMSTREAM_POSTGRES_PASSWORD_FILE",
            "IVMSTREAM_KAFKA_SASL_USERNAME_FILE",
            "IVMSTREAM_KAFKA_SASL_PASSWORD_FILE",
            "IVMSTREAM_KAFKA_SSL_CA_LOCATION",
        } | ({"IVMSTREAM_SERVE_TOKEN_FILE"} if serve else set())
        for path in files.values():
            assert any(path.startswith(mount + "/") for mount in mounts), path
        assert all("valueFrom" not in e for e in container["env"])  # no secret as an environment value
    for cm in _kind(full_docs, "ConfigMap").values():
        assert "sasl.password" not in json.dumps(cm)


def test_environment_names_are_read_by_the_code(default_docs, full_docs):
    for spec in _pod_specs(default_docs) + _pod_specs(full_docs):
        for container in spec["containers"]:
            for env in container.get("env", []):
                assert read_by_the_code(env["name"]), env["name"]


def test_optional_resources(full_docs):
    services = {d.name: d for d in deployable_services()}
    hpas = _kind(full_docs, "HorizontalPodAutoscaler")
    assert len(hpas) == len(services)
    for hpa in hpas.values():
        name = hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"]["service"]
        assert hpa["spec"]["maxReplicas"] == services[name].partitions
    assert len(_kind(full_docs, "PodDisruptionBudget")) == len(services)
    assert len(_kind(full_docs, "CronJob")) == sum(d.batch for d in services.values())
    assert len(_kind(full_docs, "Job")) == 1
    [monitor] = _kind(full_docs, "ServiceMonitor").values()
    ports = {p["name"] for s in _kind(full_docs, "Service").values() for p in s["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    dashboards = [
        cm for cm in _kind(full_docs, "ConfigMap").values() if "grafana_dashboard" in cm["metadata"]["labels"]
    ]
    assert {k for cm in dashboards for k in cm["data"]} == {
        p.name for p in (CHART / "dashboards").glob("*.json")
    }


def test_prometheus_rule_passes_promtool(full_docs, tmp_path):
    [rule] = _kind(full_docs, "PrometheusRule").values()
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    proc = run_tool(tool("promtool"), "check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "rules").glob("*.yaml"))]
    assert sorted(g["name"] for g in rule["spec"]["groups"]) == sorted(
        g["name"] for f in files for g in f["groups"]
    )


def _justified() -> set[str]:
    return set(re.findall(r"checkov:skip=(CKV2?_K8S_\d+):", (CHART / "values.yaml").read_text()))


def test_checkov_findings_are_fixed_or_justified(default_docs, full_docs, tmp_path):
    for name, docs in (("default", default_docs), ("full", full_docs)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    checkov = tool("checkov")
    proc = run_tool(
        checkov, "-d", str(tmp_path), "--framework", "kubernetes", "--quiet", "--compact", "--skip-download",
        "-o", "json", timeout=300,
    )  # fmt: skip
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = {f["check_id"] for r in reports for f in r["results"]["failed_checks"]}
    assert sum(r["summary"]["passed"] for r in reports) > 0
    assert failed <= _justified(), f"fix or justify in values.yaml: {sorted(failed - _justified())}"
    assert _justified() <= failed, f"justified but no longer found: {sorted(_justified() - failed)}"


def test_replicas_beyond_the_partitions_fail_with_the_reason():
    d = deployable_services()[0]
    with pytest.raises(helm.HelmError, match=rf"services\.{d.name}\.replicas is {d.partitions + 1}, but"):
        render({"stateBackend": "redis", "services": {d.name: {"replicas": d.partitions + 1}}})


def test_rocksdb_state_runs_one_worker_per_service():
    """Each worker's RocksDB state is on its own volume: more workers, or autoscaling, are refused."""
    keyed = [d for d in deployable_services() if d.partitions > 1]
    assert keyed, "a service with several partitions is needed to show the refusal"
    message = r"with stateBackend rocksdb each worker keeps its partitions' state on its own volume"
    with pytest.raises(helm.HelmError, match=rf"services\.{keyed[0].name}: {message}"):
        render({"services": {keyed[0].name: {"replicas": 2}}})
    with pytest.raises(helm.HelmError, match=message):
        render({"autoscaling": {"enabled": True}})
    render({"stateBackend": "redis", "services": {keyed[0].name: {"replicas": 2}}})  # Redis state: fine


def test_template_checks_refuse_inconsistent_options():
    batch = [d.name for d in deployable_services() if d.batch]
    bootstrap = {"enabled": True, "service": batch[0], "snapshot": "s.parquet", "snapshotClaim": "snaps"}
    with pytest.raises(helm.HelmError, match=r"bootstrap\.enabled needs stateBackend: redis"):
        render({"bootstrap": bootstrap})
    with pytest.raises(helm.HelmError, match=r"kafka\.sasl\.existingSecret"):
        render({"kafka": {"bootstrap": "k:9092", "sasl": {"enabled": True}}})
    disabled = {"services": {batch[0]: {"enabled": False}}, "stateBackend": "redis", "bootstrap": bootstrap}
    with pytest.raises(helm.HelmError, match="is not an enabled service"):
        render(disabled)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"stateBackend": "postgres"}, "stateBackend"),
        ({"services": {"no-such-service": {"replicas": 1}}}, "no-such-service"),
        ({"image": {"repository": "ivmstream", "tag": "latest"}}, "tag"),
        ({"services": {"__first__": {"replicas": "two"}}}, "replicas"),
    ],
)
def test_bad_values_fail_at_install_with_the_schema_message(values, message):
    first = deployable_services()[0].name
    values = json.loads(json.dumps(values).replace("__first__", first))
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmValuesError, match=message):
        chart.validate_schema(values)


def test_bad_values_file_fails_with_the_schema_message(tmp_path):
    """A values file as a user writes it: parsed by Helm, refused by values.schema.json."""
    path = Path(tmp_path / "values.yaml")
    path.write_text("stateBackend: redis\nredis:\n  host: redis\n  prot: 6379\n")
    values = helm.values_from_yaml(path.read_text())
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmValuesError, match="prot"):
        chart.validate_schema(values)


def test_generated_chart_files_are_current():
    from deploy.__main__ import stale_files

    stale = [p for p in stale_files() if p.startswith("charts/")]
    assert stale == [], f"regenerate with `python -m deploy`: {stale}"


def test_chart_release_matches_the_package_version():
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert chart["appVersion"] == values["image"]["tag"] == version


def test_notes_name_every_service_with_its_partitions():
    with helm.Chart.load(str(CHART)) as chart:
        notes = chart.render(None, name=RELEASE, namespace=NAMESPACE)["ivmstream/templates/NOTES.txt"]
    for d in deployable_services():
        assert f"{d.name}: 1 worker(s) on {d.input_topic} ({d.partitions} partition(s))" in notes
