"""What a deployment needs to know about each service, read from its declaration (never a fixed list):
every ``services/<name>/service.py`` that is not a platform-only reference service."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ivmstream.config import build_config
from ivmstream.service import DemoWorkload, available_services, load_service

REPO = Path(__file__).resolve().parents[1]
# Where the image installs the package (docker/Dockerfile): the demo inputs ship as package data.
IMAGE_SITE_PACKAGES = "/opt/ivmstream/lib/python3.11/site-packages"
METRICS_PORT = 9100
STATE_ROOT = "/var/lib/ivmstream"  # the image's volume; RocksDB state goes under state/
CONFIG_DIR = "/etc/ivmstream"
# Where each repository folder installs in the package (setup.py's package_dir, as paths).
INSTALLED_FOLDERS = {"shared": "ivmstream", "services": "ivmstream/services"}


def installed_path(repo_path: Path) -> str:
    """Where a file of the repository's shared/ or services/ lies in site-packages, as a relative path."""
    folder, *rest = repo_path.resolve().relative_to(REPO).parts
    return "/".join([INSTALLED_FOLDERS[folder], *rest])


def repo_path(installed: str) -> Path:
    """The repository file that installs at ``installed`` (relative to site-packages)."""
    for folder, package in sorted(INSTALLED_FOLDERS.items(), key=lambda item: -len(item[1])):
        if installed.startswith(package + "/"):
            return REPO / folder / installed.removeprefix(package + "/")
    raise ValueError(f"{installed} is not in the ivmstream package")


@dataclass(frozen=True)
class Deployable:
    name: str
    summary: str
    config: dict[str, Any]  # the config file the workers run: the demo's, else the service's defaults
    input_topic: str
    output_topic: str
    dlq_topic: str
    partitions: int  # of the input topic; also the most workers that can share the service
    keyed: bool  # without key_field a service's input is one ordered stream on partition 0
    batch: bool  # provides Spark bootstrap/reconcile jobs
    demo: DemoWorkload | None

    def demo_input_in_image(self) -> str | None:
        if self.demo is None:
            return None
        return f"{IMAGE_SITE_PACKAGES}/{installed_path(self.demo.input)}"

    def demo_produce_args(self) -> list[str] | None:
        """``ivmstream produce`` of the demo workload inside the image (the config file gives the topic)."""
        path = self.demo_input_in_image()
        if self.demo is None or path is None:
            return None
        args = ["--service", self.name, "--config", f"{CONFIG_DIR}/{self.name}.yaml", "--input", path]
        args += ["--format", self.demo.format]
        for key, value in sorted(self.demo.read_options.items()):
            args += ["--read-option", f"{key}={value}"]
        return args


def deployable_services() -> list[Deployable]:
    found = []
    for name in sorted(available_services()):
        service = load_service(name)
        if service.platform_only:
            continue
        demo = service.demo
        raw = dict(demo.config) if demo is not None else {}
        config = build_config(service, raw, source=f"{name} deployment config")
        keyed = config.key_field is not None
        found.append(
            Deployable(
                name=name,
                summary=service.summary,
                config=raw,
                input_topic=config.input_topic,
                output_topic=config.output_topic,
                dlq_topic=config.dlq_topic,
                partitions=(demo.partitions if demo is not None else 1) if keyed else 1,
                keyed=keyed,
                batch=service.batch is not None,
                demo=demo,
            )
        )
    return found
