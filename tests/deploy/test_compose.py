"""docker/compose.yaml: valid against the Compose Specification schema (check-jsonschema's vendored copy),
generated from the services' declarations, and referring only to what the code really has: CLI flags,
service names, config keys, the metrics port, the environment variables it reads."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml
from deploy_tools import REPO, parse_cli, read_by_the_code, run_tool, tool

from deploy.grafana_role import GRAFANA_SECRET, GRAFANA_USER, init_script
from deploy.services import IMAGE_SITE_PACKAGES, METRICS_PORT, STATE_ROOT, deployable_services, repo_path
from ivmstream.config import load_config
from ivmstream.service import available_services, load_service

DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _deployed() -> set[str]:
    """Every service a deployment runs, enumerated the way the platform finds them."""
    return {n for n in available_services() if not load_service(n).platform_only}


def _ivmstream_containers(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if s.get("build", {}).get("context") == ".."}


def test_valid_against_the_compose_spec_schema():
    proc = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generated_files_are_current():
    from deploy.__main__ import stale_files

    stale = [p for p in stale_files() if p.startswith("docker/")]
    assert stale == [], f"regenerate with `python -m deploy`: {stale}"


def test_one_worker_with_a_state_volume_per_service(compose):
    workers = {name.removesuffix("-worker") for name in compose["services"] if name.endswith("-worker")}
    assert workers == _deployed()
    for name in workers:
        worker = compose["services"][f"{name}-worker"]
        args = parse_cli(worker["command"])
        assert args.command == "run" and args.service == name
        assert args.state_dir.startswith(STATE_ROOT + "/")
        assert f"{name}-state:{STATE_ROOT}" in worker["volumes"] and f"{name}-state" in compose["volumes"]
        assert worker["read_only"] is True and "/tmp" in worker["tmpfs"]
        assert worker["user"].split(":")[0] not in ("0", "root")


def test_every_ivmstream_command_parses_and_its_config_loads(compose, tmp_path):
    containers = _ivmstream_containers(compose)
    assert containers
    for name, container in containers.items():
        args = parse_cli(container["command"])
        service = load_service(args.service)
        mounted = {c["target"]: compose["configs"][c["source"]]["file"] for c in container["configs"]}
        assert args.config in mounted, name
        config = load_config(service, str(DOCKER / mounted[args.config]))
        if args.command == "produce":
            assert name == f"{args.service}-demo" and container["profiles"] == ["demo"]
            assert [path.startswith(IMAGE_SITE_PACKAGES + "/") for path in args.input] == [True]
        else:
            assert args.metrics_port == METRICS_PORT
            assert config.input_topic in compose["services"]["topics"]["command"][0]


def test_demo_inputs_ship_in_the_image_as_package_data(compose):
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    producers = [s for s in compose["services"].values() if "demo" in s.get("profiles", [])]
    with_demo = {d.name for d in deployable_services() if d.demo is not None}
    assert {parse_cli(p["command"]).service for p in producers} == with_demo
    for producer in producers:
        [path] = parse_cli(producer["command"]).input
        relative = path.removeprefix(IMAGE_SITE_PACKAGES + "/")
        assert relative.startswith("ivmstream/services/"), relative
        assert repo_path(relative).is_file(), relative
        assert any(fnmatch(Path(relative).name, pattern) for pattern in patterns), relative


def test_topics_job_creates_each_services_topics_partitioned(compose):
    script = compose["services"]["topics"]["command"][0]
    created = dict(re.findall(r"--topic (\S+) --partitions (\d+)", script))
    for d in deployable_services():
        assert int(created[d.input_topic]) == d.partitions
        assert d.output_topic in created and d.dlq_topic in created
        if not d.keyed:
            assert d.partitions == 1  # a service without key_field reads one ordered stream on partition 0
    assert compose["services"]["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:")


def test_prometheus_scrapes_every_worker_on_the_metrics_port(compose):
    prom = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    targets = {t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{n}-worker:{METRICS_PORT}" for n in _deployed()}
    for n in _deployed():
        assert str(METRICS_PORT) in compose["services"][f"{n}-worker"]["expose"]


def test_secrets_come_from_the_env_file_and_env_names_are_real(compose):
    text = COMPOSE.read_text()
    interpolated = set(re.findall(r"\$\{(\w+)(?::?[-?][^}]*)?\}", text))
    lines = (DOCKER / "env.example").read_text().splitlines()
    example = dict(line.lstrip("# ").split("=", 1) for line in lines if "=" in line)
    assert interpolated <= set(example), interpolated - set(example)
    # secret files live in a folder git ignores, and env.example says how to create each
    ignored = (DOCKER / ".gitignore").read_text().split()
    for secret in compose["secrets"].values():
        assert secret["file"].startswith("./secrets/") and "secrets/" in ignored
        assert f"docker/{secret['file'].removeprefix('./')}" in "\n".join(lines)
    # the Redis password is a secret file: in no URL, command or environment value
    assert "REDIS_PASSWORD}" not in text and "requirepass" in text
    redis_url = parse_cli(compose["services"][f"{sorted(_deployed())[0]}-worker"]["command"]).redis
    assert "@" not in redis_url
    for container in _ivmstream_containers(compose).values():
        for name, value in container.get("environment", {}).items():
            assert read_by_the_code(name), f"{name} is set but the code never reads it"
            if name.endswith("_FILE"):
                assert value.removeprefix("/run/secrets/") in container["secrets"], name
    datasource = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


def test_results_reach_postgresql_and_serve_answers_them(compose):
    pg_dsn = None
    for name in _deployed():
        args = parse_cli(compose["services"][f"{name}-worker"]["command"])
        assert (
            args.postgres
            and "@postgres:5432/" in args.postgres
            and ":" not in args.postgres.split("@")[0][13:]
        )
        pg_dsn = args.postgres
    serve = compose["services"]["serve"]
    assert serve["image"] == compose["services"][f"{sorted(_deployed())[0]}-worker"]["image"]
    args = parse_cli(serve["command"])
    assert args.command == "serve" and args.postgres == pg_dsn and args.redis
    for name, value in serve["environment"].items():
        assert read_by_the_code(name), name
        if name.endswith("_FILE"):
            assert value.removeprefix("/run/secrets/") in serve["secrets"], name
    assert compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"].startswith(
        "/run/secrets/"
    )
    datasource = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/results.yaml").read_text())
    [source] = datasource["datasources"]
    grafana = compose["services"]["grafana"]
    assert source["url"] == "postgres:5432" and source["user"] == GRAFANA_USER
    assert grafana["secrets"] == [GRAFANA_SECRET]  # Grafana never holds the workers' password
    assert GRAFANA_SECRET in source["secureJsonData"]["password"]
    postgres = compose["services"]["postgres"]
    assert GRAFANA_SECRET in postgres["secrets"] and GRAFANA_SECRET in compose["secrets"]
    [initdb] = [v for v in postgres["volumes"] if v.endswith(":/docker-entrypoint-initdb.d:ro")]
    assert (DOCKER / initdb.split(":")[0] / "grafana-role.sh").read_text() == init_script()


def test_the_schema_check_rejects_a_misspelt_key(compose, tmp_path):
    broken = dict(compose)
    broken["services"] = {**compose["services"], "redis": {**compose["services"]["redis"], "restrat": "no"}}
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(broken))
    proc = run_tool(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path))
    assert proc.returncode != 0 and "restrat" in proc.stdout + proc.stderr
