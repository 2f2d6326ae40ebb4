"""A service is a declaration: its options, relations, engine factory and demo workload.

The runtime, ``replay``, the CLI and the demo only ever see a ``ServiceDefinition``; a new service
is one folder ``services/<name>/`` (installed as ``ivmstream.services.<name>``) whose ``service.py``
exposes ``SERVICE``, or a ``module:attribute`` registered under the ``ivmstream.services`` entry-point
group by another distribution.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from ivmstream.engine import JSON, Engine
from ivmstream.events import InputFormat, Relation
from ivmstream.options import ConfigError, Option, parse_options
from ivmstream.relations import describe

SERVICE_ENTRY_POINTS = "ivmstream.services"


@dataclass(frozen=True)
class DemoWorkload:
    """A bundled sample input: the demo produces it and the conformance suite (ivmstream.testing) runs it."""

    input: Path
    format: str = "jsonl"
    config: Mapping[str, Any] = field(default_factory=dict)
    partitions: int = 1
    read_options: Mapping[str, Any] = field(default_factory=dict)
    name: str = "demo"


class Sharding(Protocol):
    """What a service provides to scale one query over workers (docs/architecture.md, "Scaling one
    query over workers"): each input partition's engine computes the query over its slice of the data,
    and the coordinator publishes the sum of their results."""

    def check_shard_by(self, options: Mapping[str, Any], shard_by: str) -> None:
        """Raise ValueError (saying why) unless the sum over shards of this query, each shard holding
        the events whose ``shard_by`` value hashes to it plus every event without that column, is the
        query over all events."""
        ...

    def partial_result(self, engine: Engine) -> JSON:
        """What a shard publishes: its engine's result in a form ``combine_partials`` sums exactly (for
        a ring, the root payloads themselves rather than their rounded JSON)."""
        ...

    def combine_partials(self, options: Mapping[str, Any], partials: Sequence[JSON]) -> JSON:
        """The query's result, in the engine's result form, from the shards' ``partial_result``s: their
        sum. With no partial at all, the result over the empty database."""
        ...


@dataclass(frozen=True)
class ServiceDefinition:
    name: str
    summary: str
    options: Mapping[str, Option]
    relations: Callable[[Mapping[str, Any]], Sequence[Relation]]
    engine: Callable[[Mapping[str, Any]], Engine]
    validate: Callable[[Mapping[str, Any]], None] | None = None
    demo: DemoWorkload | None = None
    workloads: Sequence[DemoWorkload] = ()  # further inputs the conformance suite runs besides the demo
    state_version: int = 1  # bump when the stored state of this service changes shape (checkpoint envelope)
    batch: str | None = None  # "module:attribute" of its Spark BatchJobs (imported only when needed)
    platform_only: bool = False  # reference services used by the platform's own tests and demo
    formats: Mapping[str, InputFormat] = field(default_factory=dict)  # its own input formats, by name
    sharding: str | None = None  # "module:attribute" of its Sharding, if one query can span workers
    # The reason codes its engine refuses events with, and what each means (docs/reasons.md lists them).
    reasons: Mapping[str, str] = field(default_factory=dict)
    # Option settings whose relations --help and the docs show, for a service whose config does not
    # declare its relations (each setting a partial config: {"mode": "graph"}).
    fixed_relations: Sequence[Mapping[str, Any]] = ()
    # Its result mode where the config sets no ``emit``: "checkpoint" for a result that costs a pass over
    # the state (docs/architecture.md, "Result modes"); a sharded or keyless merged view keeps "batch".
    emit: str = "batch"

    def relations_help(self) -> list[str]:
        """The relations this service reads, in the one declaration form, one line each: its
        ``relations`` key's help when the config declares them, else each ``fixed_relations`` setting
        with the relations it gives."""
        if "relations" in self.options:
            return [f"relations (config key): {self.options['relations'].help}"]
        lines = []
        for setting in self.fixed_relations or ({},):
            options = parse_options(self.options, setting, owner=f"service {self.name}")
            label = ", ".join(f"{k} {v}" for k, v in setting.items()) or "always"
            lines.append(f"{label}: {describe(self.relations(options))}")
        return lines


def load_sharding(service: ServiceDefinition) -> Sharding | None:
    """The service's ``Sharding`` (imported on first use), or None if it declares none."""
    if service.sharding is None:
        return None
    module_name, _, attr = service.sharding.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"service {service.name}: cannot load its sharding {service.sharding!r}: {exc}"
        ) from None


def available_services() -> dict[str, str]:
    """Every service by name, as ``module:attribute`` of its ServiceDefinition (not imported yet): each
    ``ivmstream/services/<name>/service.py``, then those other distributions register under the
    ``ivmstream.services`` entry-point group (a name already taken keeps its first meaning).

    The platform never imports a service statically: services depend on the platform, not back."""
    services = importlib.import_module("ivmstream.services")
    found: dict[str, str] = {}
    for portion in services.__path__:
        for m in pkgutil.iter_modules([portion]):
            if m.ispkg and (Path(portion) / m.name / "service.py").is_file():
                found.setdefault(m.name, f"ivmstream.services.{m.name}.service:SERVICE")
    for entry in entry_points(group=SERVICE_ENTRY_POINTS):
        found.setdefault(entry.name, entry.value)
    return found


def load_service(name: str) -> ServiceDefinition:
    """A service by name, or any ``module:attribute`` holding a ServiceDefinition."""
    if ":" not in name:
        modules = available_services()
        if name not in modules:
            raise ConfigError(f"unknown service {name!r} (available: {', '.join(sorted(modules))})")
        name = modules[name]
    module_name, attr = name.split(":", 1)
    try:
        module = importlib.import_module(module_name)
        service = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load service {name!r}: {exc}") from None
    if not isinstance(service, ServiceDefinition):
        raise ConfigError(f"{name!r} is not a ServiceDefinition")
    return service
