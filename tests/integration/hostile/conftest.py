"""Fixtures of the hostile-input and secrets tests: a redis-server that needs credentials and speaks TLS."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from secure_redis import SecureRedis, make_pki


@pytest.fixture(scope="module")
def secure_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRedis]:
    server = SecureRedis(make_pki(tmp_path_factory.mktemp("pki"))).start()
    try:
        yield server
    finally:
        server.stop()
