"""A throwaway local redis-server on a free loopback port (demo and tests; persistent only when given a
data directory). ``spawn_redis_server``/``stop_redis_server`` also run the tests' server with
credentials and TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_redis_server(
    args: Sequence[str], port: int, probe: redis.Redis, timeout: float
) -> subprocess.Popen[bytes]:
    """``redis-server ARGS``, once ``probe`` (a client of the server on ``port``) has its PING answered;
    one that exits first is an error quoting its stderr, one silent past ``timeout`` is stopped."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed (run `make setup`)")
    proc = subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while True:
        try:
            probe.ping()
            return proc
        except redis.ConnectionError:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                raise RuntimeError(f"redis-server exited: {err or proc.returncode}") from None
            if time.monotonic() > deadline:
                stop_redis_server(proc)
                raise RuntimeError(f"redis-server did not answer on port {port}") from None
            time.sleep(0.05)


def stop_redis_server(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 5 s; nothing if it already exited."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RedisServer:
    def __init__(self, port: int | None = None, data_dir: str | None = None) -> None:
        """``data_dir``: keep the data there (append-only file, fsync always), so a restart on the same
        port and directory comes back with it; without, every start is empty."""
        self.port = port or free_port()
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always", "--dir", self.data_dir]
            if self.data_dir
            else ["--appendonly", "no"]
        )
        args = ["--bind", "127.0.0.1", "--port", str(self.port), "--save", "", *persistence]
        args += ["--protected-mode", "yes", "--loglevel", "warning"]
        probe = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        self.proc = spawn_redis_server(args, self.port, probe, timeout)
        return self

    def stop(self) -> None:
        stop_redis_server(self.proc)
        self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
