"""The machine a report was measured on: figures from a shared 2-core VM mean little without the CPU,
the library versions and the load, so every report carries them."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
from pathlib import Path
from typing import Any

import confluent_kafka


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _first(v: Any) -> Any:
    """confluent_kafka's version() is a (str, int) tuple in older releases and a plain str in newer ones."""
    return v[0] if isinstance(v, tuple) else v


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages now, rounded: recorded at a run's start and end."""
    return [round(v, 2) for v in os.getloadavg()]


def machine_info(**extra: Any) -> dict[str, Any]:
    """CPU, platform, Python, the Kafka and storage libraries, and the load average now; plus ``extra``."""
    cpu_model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "loadavg_1_5_15": load_average(),
        "confluent_kafka": _first(confluent_kafka.version()),
        "librdkafka": _first(confluent_kafka.libversion()),
        "orjson": dist_version("orjson"),
        "rocksdict": dist_version("rocksdict"),
        **extra,
    }
