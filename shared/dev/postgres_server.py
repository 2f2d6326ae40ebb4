"""A throwaway local PostgreSQL server on a free loopback port (tests and the demo): a new cluster in a
temporary directory, trust authentication on 127.0.0.1, removed when stopped.

PostgreSQL refuses to run as root, so a root process starts it as the ``postgres`` user (Debian's
package creates that user) and hands it the directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from ivmstream.dev.redis_server import free_port

USER = "ivmstream"


def postgres_bindir() -> Path | None:
    """Where ``initdb`` and ``postgres`` are: on PATH, else Debian's versioned directory (newest)."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]), reverse=True
    )
    return Path(versions[0]).parent if versions else None


def _run_as() -> pwd.struct_passwd | None:
    """The account to run the server as: ``postgres`` when this process is root, else this one."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root needs a 'postgres' user to run PostgreSQL as") from None


class PostgresServer:
    """``with PostgresServer() as pg: pg.dsn`` — a fresh cluster; ``fsync`` off unless asked for."""

    def __init__(self, port: int | None = None, fsync: bool = False) -> None:
        self.port = port or free_port()
        self.fsync = fsync
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: str | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def start(self, timeout: float = 30.0) -> PostgresServer:
        bindir = postgres_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (run `make setup-dev`)")
        account = _run_as()
        self._tmp = tempfile.mkdtemp(prefix="ivmstream-pg-")
        data = Path(self._tmp) / "data"
        if account is not None:
            os.chown(self._tmp, account.pw_uid, account.pw_gid)
        uid, gid = (account.pw_uid, account.pw_gid) if account else (None, None)
        extra_groups: list[int] | None = [] if account else None
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"],
            capture_output=True,
            env=env,
            cwd=self._tmp,
            user=uid,
            group=gid,
            extra_groups=extra_groups,
        )
        if init.returncode != 0:
            self._cleanup()
            raise RuntimeError(f"initdb failed: {init.stderr.decode(errors='replace').strip()}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": self._tmp,
            "fsync": "on" if self.fsync else "off",
            "synchronous_commit": "on" if self.fsync else "off",
            "full_page_writes": "on" if self.fsync else "off",
            "max_connections": "200",
        }
        args = [str(bindir / "postgres"), "-D", str(data)]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self._tmp,
            user=uid,
            group=gid,
            extra_groups=extra_groups,
        )
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn, connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
                    self.stop()
                    raise RuntimeError(f"postgres exited: {err or self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres did not answer on port {self.port}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Fast shutdown (SIGINT), SIGKILL after 10 s; then the cluster's directory is removed."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(2)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
