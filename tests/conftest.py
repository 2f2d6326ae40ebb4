"""Session-wide real infrastructure: one embedded broker process, one redis-server and one PostgreSQL
server for all tests (each started when a test first asks for it). Under pytest-xdist (``make test``)
each worker process is a session of its own, with servers of its own on free ports."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from ivmstream.dev.broker import BrokerProcess
from ivmstream.dev.postgres_server import PostgresServer
from ivmstream.dev.redis_server import RedisServer

# Shared CI machines are slow and noisy: judge properties, not the speed of input generation.
settings.register_profile(
    "ivmstream",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile("ivmstream")


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as proc:
        yield proc


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def unique() -> str:
    """A fresh name prefix so tests sharing the broker and Redis never see each other's data."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _registered_secrets_per_test() -> Iterator[None]:
    """Secrets a test registers (a DSN's password, a token) are masked in that test's output only: a
    short one such as ``view`` would otherwise mask that word in the paths and messages of later tests."""
    from ivmstream import secrets

    before = set(secrets._known)
    yield
    secrets._known.intersection_update(before)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a slow test (the demo, benchmark smoke runs, kill -9 restarts) first, in their
    collected order and whole: pytest-xdist hands out modules in this order, so the long ones start while
    short ones remain to fill the other worker, instead of ending the run on one worker alone."""
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow") and item.module}
    items.sort(key=lambda item: item.module is None or item.module.__name__ not in slow)
