"""Session-wide real infrastructure: one embedded broker process and one redis-server for all tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.broker import BrokerProcess
from shared.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[1]
DBTOASTER = REPO.parent / "shared" / "data" / "dbtoaster"  # public data beside the checkout, may be absent


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as proc:
        yield proc


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def unique() -> str:
    """A fresh name prefix so tests sharing the broker and Redis never see each other's data."""
    return f"t{uuid.uuid4().hex[:10]}"
