"""Conformance cases: one service and one of its workloads, with the workload's records and events."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ivmstream.config import ServiceConfig, build_config, schema_of
from ivmstream.engine import Engine
from ivmstream.events import EventCodec, EventError, SourceRecord, UpdateEvent, read_source
from ivmstream.replay import KEYLESS
from ivmstream.service import DemoWorkload, ServiceDefinition, available_services, load_service


@dataclass
class Case:
    """One service (by the name the CLI loads it with) and one of its workloads."""

    name: str
    service: ServiceDefinition
    workload: DemoWorkload

    def __str__(self) -> str:
        return f"{self.name}/{self.workload.name}"

    @cached_property
    def config(self) -> ServiceConfig:
        return build_config(self.service, dict(self.workload.config), source=f"{self} workload config")

    @property
    def keyed(self) -> bool:
        return self.config.key_field is not None

    @cached_property
    def records(self) -> list[SourceRecord]:
        """The workload's records, as ``produce`` puts them on the wire and ``replay`` reads them."""
        w = self.workload
        source = read_source(w.input, w.format, key_field=self.config.key_field, **w.read_options)
        return [r for r in source if r.error is None]

    def events_by_key(self) -> dict[str, list[UpdateEvent]]:
        """Freshly decoded events per partition key, in log order (what the runtime hands each engine);
        records the codec refuses never reach an engine and are left out."""
        codec = EventCodec(schema_of(self.service, self.config))
        out: dict[str, list[UpdateEvent]] = {}
        for item in codec.decode_many(r.value for r in self.records):
            if not isinstance(item, EventError):
                out.setdefault(item.key if self.keyed else KEYLESS, []).append(item)
        return out

    def engine(self) -> Engine:
        return self.service.engine(self.config.options)


def conformance_cases(names: Iterable[str] | None = None) -> list[Case]:
    """Every (service, workload) pair: the demo first, then the further workloads."""
    cases = []
    for name in sorted(names if names is not None else available_services()):
        service = load_service(name)
        workloads = [w for w in (service.demo, *service.workloads) if w is not None]
        names_seen = [w.name for w in workloads]
        if len(set(names_seen)) != len(names_seen):
            raise AssertionError(f"service {name}: workload names repeat: {names_seen}")
        cases += [Case(name, service, w) for w in workloads]
    return cases


def short(value: Any, width: int = 300) -> str:
    """``repr(value)``, cut to ``width`` characters for an assertion message."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment (ivmstream is installed; PYTHONPATH is passed on, so services that
    other directories on it register are found), quieter logs, and ``extra``."""
    env = dict(os.environ)
    env.setdefault("IVMSTREAM_LOG_LEVEL", "WARNING")
    env.update(extra or {})
    return env
