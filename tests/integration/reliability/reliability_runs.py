"""Helpers for the fault and chaos tests: a stream run whose workers can be many, and the demo
workload of every service."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ivmstream.dev.broker import BrokerProcess
from ivmstream.dev.redis_server import free_port
from ivmstream.events import SourceRecord
from ivmstream.testing import Case, StreamRun, child_environment, conformance_cases


def demo_cases() -> list[Case]:
    """Each service's demo workload (the first case of each service)."""
    seen: dict[str, Case] = {}
    for case in conformance_cases():
        seen.setdefault(case.name, case)
    return list(seen.values())


def parts(records: Sequence[SourceRecord], count: int) -> list[Sequence[SourceRecord]]:
    """``records`` cut into ``count`` consecutive, nearly equal parts."""
    bounds = [len(records) * i // count for i in range(count + 1)]
    return [records[bounds[i] : bounds[i + 1]] for i in range(count)]


@dataclass
class Run(StreamRun):
    """A StreamRun whose workers each log to their own file, at INFO so assignments are visible."""

    started: int = field(default=0)
    metrics_ports: dict[str, int] = field(default_factory=dict)

    def start_named(self, name: str) -> subprocess.Popen[bytes]:
        """Start worker ``name`` (again), serving its metrics on a fresh port (see ``owned``)."""
        self.started += 1
        self.metrics_ports[name] = port = free_port()
        args = self.worker_command("--metrics-port", str(port))
        log = self.worker_log(name)
        with open(log, "ab") as out:
            out.write(f"--- start {self.started}\n".encode())
            out.flush()
            return subprocess.Popen(
                args,
                stdout=subprocess.DEVNULL,
                stderr=out,
                env=child_environment({"IVMSTREAM_LOG_LEVEL": "INFO"}),
                cwd=self.workdir,
            )

    def owned(self, name: str) -> int | None:
        """How many input partitions worker ``name`` owns now (its assigned-partitions gauge); None
        while it does not answer yet."""
        url = f"http://127.0.0.1:{self.metrics_ports[name]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                text = reply.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("ivmstream_assigned_partitions"):
                return int(float(line.rsplit(" ", 1)[1]))
        return None

    def worker_log(self, name: str) -> Path:
        return self.workdir / f"{self.prefix}.{name}.log"

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace") for p in sorted(self.workdir.glob(f"{self.prefix}.*.log"))
        )

    def tail(self) -> str:
        return self.logs()[-4000:]


def pin_to(broker: BrokerProcess, run: Run, broker_id: int) -> None:
    """Make ``broker_id`` the group's coordinator and the leader of every input partition, so faults
    stacked on that broker meet the worker's requests."""
    broker.fault("coordinator", group=run.group, broker=broker_id)
    for p in range(run.case.workload.partitions):
        broker.fault("leader", topic=run.topic, partition=p, broker=broker_id)


def uncheckpointed(run: Run) -> int:
    """Input records whose effect is published but not yet covered by the group's checkpoint (results
    read first, checkpoint second, so a checkpoint in between only makes this smaller)."""
    reached = run.published_offsets()
    return sum(max(0, reached.get(p.partition, 0) - p.committed) for p in run.progress())


def redone(run: Run) -> bool:
    """Whether the group's checkpoint covers everything published so far, including what killed
    workers published past their last checkpoint."""
    reached = run.published_offsets()
    return all(p.committed >= reached.get(p.partition, 0) for p in run.progress())
