"""Fault and chaos fixtures: a three-broker embedded cluster per test, so faults never outlive their
test; Redis and the name prefix come from tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ivmstream.dev.broker import BrokerProcess


@pytest.fixture
def fault_broker() -> Iterator[BrokerProcess]:
    """Three brokers: enough to move a group coordinator and partition leaders between them."""
    with BrokerProcess(brokers=3) as proc:
        yield proc
