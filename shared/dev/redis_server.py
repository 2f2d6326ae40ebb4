"""A throwaway local redis-server on a free loopback port (demo and tests; persistent only when given a
data directory)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from types import TracebackType

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (run `make setup`)")
        self.proc = subprocess.Popen(
            [
                exe,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                *(
                    ["--appendonly", "yes", "--appendfsync", "always", "--dir", self.data_dir]
                    if self.data_dir
                    else ["--appendonly", "no"]
                ),
                "--protected-mode",
                "yes",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
                    raise RuntimeError(f"redis-server exited: {err or self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer on port {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
