"""docker/Dockerfile: hadolint finds nothing, and the image is the ivmstream CLI, non-root, with its state
under a volume and a health check on the workers' /healthz."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

from deploy_tools import REPO, dockerfile_instructions, exec_form, parse_cli, run_tool, tool

DOCKERFILE = REPO / "docker" / "Dockerfile"
METRICS_PORT = 9100


def _final_stage() -> list[tuple[str, str]]:
    steps = dockerfile_instructions(DOCKERFILE)
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def _one(stage: list[tuple[str, str]], word: str) -> str:
    found = [args for w, args in stage if w == word]
    assert len(found) == 1, f"{word}: {found}"
    return found[0]


def test_hadolint_is_clean():
    proc = run_tool(tool("hadolint"), "--format", "json", str(DOCKERFILE))
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stdout + proc.stderr


def test_entrypoint_is_the_ivmstream_cli():
    stage = _final_stage()
    assert exec_form(_one(stage, "ENTRYPOINT")) == ["ivmstream"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["ivmstream"] == "ivmstream.cli:main"
    cmd = exec_form(_one(stage, "CMD"))
    # the default command runs as the CLI would run it in the image
    proc = subprocess.run(
        [sys.executable, "-m", "ivmstream.cli", *cmd], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ivmstream"), proc.stderr


def test_runs_unprivileged_with_state_on_a_volume():
    stage = _final_stage()
    user = _one(stage, "USER")
    assert user.split(":")[0] not in ("0", "root")
    workdir = _one(stage, "WORKDIR")
    assert exec_form(_one(stage, "VOLUME")) == [workdir]
    # `ivmstream run` keeps RocksDB state in ./state by default: inside the volume
    args = parse_cli(["run", "triangles", "--bootstrap", "k:9092", "--config", "c.yaml"])
    assert not args.state_dir.startswith("/")


def test_the_compiled_decoder_is_built_and_required_in_the_builder():
    steps = dockerfile_instructions(DOCKERFILE)
    froms = [args for word, args in steps if word == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS builder")
    runs = " ".join(args for word, args in steps[: steps.index(("FROM", froms[1]))] if word == "RUN")
    assert "gcc" in runs and "import ivmstream.events._fastjson" in runs
    assert (REPO / "shared" / "events" / "_fastjson.c").is_file()
    assert any(w == "COPY" and args.startswith("--from=builder ") for w, args in _final_stage())


def test_healthcheck_probes_the_metrics_port_the_worker_serves():
    stage = _final_stage()
    check = _one(stage, "HEALTHCHECK")
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", check)
    assert url is not None and int(url.group(1)) == METRICS_PORT and url.group(2) == "/healthz"
    assert _one(stage, "EXPOSE") == str(METRICS_PORT)
    assert parse_cli(["run", "vwap", "--bootstrap", "k:9092", "--config", "c", "--metrics-port", "9100"])


def test_build_context_keeps_what_the_image_copies():
    ignore = (REPO / "docker" / "Dockerfile.dockerignore").read_text().split()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for word, args in dockerfile_instructions(DOCKERFILE):
        if word == "COPY" and not args.startswith("--from"):
            copied.update(args.split()[:-1])
    assert copied <= kept, copied - kept
    for path in copied:
        assert (REPO / path).exists(), path
