"""Embedded Kafka-wire broker: librdkafka's mock cluster, driven through ctypes.

No real Kafka can be installed where ivmstream runs its demo and tests, but the librdkafka bundled in
the confluent-kafka wheel ships a mock cluster that speaks the Kafka protocol well enough for
producers (idempotent too), consumer groups with offset commits and metadata. This module wraps it:

* ``MockCluster`` runs it in the current process (``ivmstream.dev.mock_cluster``);
* ``main`` is the ``python -m ivmstream.dev.broker`` / ``ivmstream broker`` entry point: it prints the
  bootstrap address as the first stdout line, then serves until SIGTERM/SIGINT while answering a
  line protocol on stdin (``create NAME PARTITIONS`` -> ``ok NAME PARTITIONS`` | ``error CODE: why``;
  ``topics`` -> ``ok NAME:PARTITIONS ...``; the wire-level fault commands of ``ivmstream.dev.faults``:
  ``down``/``up`` a broker, ``rtt``, ``errors`` per request type, ``coordinator`` and ``leader`` moves);
* ``BrokerProcess`` runs ``main`` in a child process, for tests and the demo.

``MockCluster`` and ``BrokerError`` live in ``ivmstream.dev.mock_cluster`` (which lists the mock's limits)
and are importable from here.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import queue
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import FrameType, TracebackType
from typing import IO, Any

from ivmstream.dev.faults import COMMANDS, fault_line
from ivmstream.dev.mock_cluster import (
    MAX_BROKERS,
    MAX_PARTITIONS,
    BrokerError,
    MockCluster,
    check_partitions,
    check_topic_name,
)

__all__ = ["BrokerError", "BrokerProcess", "MockCluster", "main"]

PROG = "python -m ivmstream.dev.broker"


# --------------------------------------------------------------------------- command line


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print usage + message and exit
        raise _UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _topic_spec(text: str) -> tuple[str, int | None]:
    name, sep, count = text.partition(":")
    try:
        check_topic_name(name)
        partitions = None
        if sep:
            partitions = _positive_int(count)
            check_partitions(partitions)
    except (BrokerError, argparse.ArgumentTypeError) as exc:
        reason = exc.reason if isinstance(exc, BrokerError) else str(exc)
        raise argparse.ArgumentTypeError(f"{text!r}: {reason}") from None
    return name, partitions


def _parser(prog: str) -> _Parser:
    p = _Parser(
        prog=prog,
        description="Run librdkafka's in-memory mock Kafka cluster on 127.0.0.1 until SIGTERM/SIGINT. "
        "Prints the bootstrap address first; reads 'create NAME PARTITIONS', 'topics' and fault commands "
        "('faults' lists them: down, up, rtt, errors, coordinator, leader, ...) on stdin.",
        exit_on_error=False,
    )
    p.add_argument(
        "--partitions", type=_positive_int, default=1, metavar="N", help="for --topic without a count"
    )
    p.add_argument(
        "--topic",
        type=_topic_spec,
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create this topic at start (repeatable)",
    )
    p.add_argument("--brokers", type=_positive_int, default=1, metavar="K", help="number of mock brokers")
    p.add_argument(
        "--rebalance-delay-ms",
        type=int,
        default=0,
        metavar="MS",
        help="group.initial.rebalance.delay.ms for new consumer groups (Kafka's default is 3000)",
    )
    p.add_argument(
        "--parent-pid", type=int, default=None, metavar="PID", help="stop when PID stops being our parent"
    )
    return p


def _parse(argv: Sequence[str], prog: str) -> argparse.Namespace:
    opts = _parser(prog).parse_args(list(argv))
    if opts.brokers > MAX_BROKERS:
        raise _UsageError(f"argument --brokers: at most {MAX_BROKERS}, got {opts.brokers}")
    if opts.partitions > MAX_PARTITIONS:
        raise _UsageError(f"argument --partitions: at most {MAX_PARTITIONS}, got {opts.partitions}")
    if opts.rebalance_delay_ms < 0:
        raise _UsageError("argument --rebalance-delay-ms: must be >= 0")
    seen: set[str] = set()
    for name, _ in opts.topic:
        if name in seen:
            raise _UsageError(f"argument --topic: {name!r} given twice")
        seen.add(name)
    return opts


class _Server:
    """The serving loop of ``main``: stdin commands, signals and parent watch, single-threaded."""

    def __init__(self, cluster: MockCluster, parent_pid: int | None) -> None:
        self.cluster = cluster
        self.parent_pid = parent_pid
        self.stop_signal: int | None = None
        self._stdout_ok = True

    def emit(self, line: str) -> None:
        if not self._stdout_ok:
            return
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._stdout_ok = False  # nobody listens any more; keep serving until a signal

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signal = signum

    def answer(self, line: str) -> str | None:
        words = line.split()
        if not words:
            return None
        try:
            if words[0] == "create":
                if len(words) != 3:
                    raise BrokerError("usage: create NAME PARTITIONS", "INVALID_REQUEST")
                name, count = words[1], words[2]
                try:
                    partitions = int(count)
                except ValueError:
                    raise BrokerError(
                        f"partition count must be an integer, got {count!r}", "INVALID_PARTITIONS"
                    ) from None
                self.cluster.create_topic(name, partitions)
                return f"ok {name} {partitions}"
            if words[0] == "topics" and len(words) == 1:
                return " ".join(["ok", *(f"{n}:{p}" for n, p in self.cluster.list_topics().items())])
            if words[0] == "faults" or words[0] in COMMANDS:
                return f"ok {self.cluster.fault(words)}".rstrip()
            expected = "expected 'create NAME PARTITIONS', 'topics' or a fault command (see 'faults')"
            raise BrokerError(f"unknown command {line.strip()!r}; {expected}", "INVALID_REQUEST")
        except BrokerError as exc:
            return f"error {exc}"

    def serve(self) -> None:
        """Answer stdin lines until a stop signal or the watched parent is gone; stdin EOF is not a stop."""
        with selectors.DefaultSelector() as sel:
            try:
                fd = sys.stdin.fileno() if sys.stdin is not None else -1
                sel.register(fd, selectors.EVENT_READ)
            except (OSError, ValueError, AttributeError):
                fd = (
                    -1
                )  # no pollable stdin (closed, /dev/null, a file, a test runner's stand-in): signals only
            buffered = b""
            while self.stop_signal is None:
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    return
                if fd < 0:
                    time.sleep(0.2)
                    continue
                for _key, _events in sel.select(timeout=0.2):
                    # os.read, not sys.stdin: no Python-level buffer and no lock to hold at shutdown.
                    chunk = os.read(fd, 65536)
                    if not chunk:  # EOF: the caller may simply have nothing to say; keep serving
                        sel.unregister(fd)
                        fd = -1
                        chunk = b"\n" if buffered else b""
                    buffered += chunk
                    *lines, buffered = buffered.split(b"\n")
                    for raw in lines:
                        reply = self.answer(raw.decode(errors="replace"))
                        if reply is not None:
                            self.emit(reply)


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    """Run the mock cluster in this process until SIGTERM/SIGINT; 0 on a clean stop, 2 on bad usage.

    Must run in the main thread (signal handlers); restores the previous handlers before returning.
    """
    try:
        opts = _parse(sys.argv[1:] if argv is None else argv, prog)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (_UsageError, argparse.ArgumentError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return 2

    if threading.current_thread() is not threading.main_thread():
        print(f"{prog}: error: must run in the main thread (it handles SIGTERM/SIGINT)", file=sys.stderr)
        return 1
    cluster = MockCluster(opts.brokers, rebalance_delay_ms=opts.rebalance_delay_ms)
    server = _Server(cluster, opts.parent_pid)
    previous = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, server.on_signal)
        cluster.start()
        for name, partitions in opts.topic:
            cluster.create_topic(name, opts.partitions if partitions is None else partitions)
        server.emit(cluster.bootstrap)
        server.serve()
    except BrokerError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        cluster.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


# --------------------------------------------------------------------------- child process helper


class BrokerProcess:
    """``python -m ivmstream.dev.broker`` as a child process, for tests and the demo.

    ``with BrokerProcess(topics={"orders": 3}) as broker:`` then ``broker.bootstrap``. The child
    exits by itself if this process dies (``--parent-pid``), so a crashed test leaves no broker behind.
    """

    def __init__(
        self,
        *,
        topics: Mapping[str, int] | Iterable[str] = (),
        partitions: int = 1,
        brokers: int = 1,
        rebalance_delay_ms: int = 0,
        startup_timeout: float = 20.0,
        python: str = sys.executable,
    ) -> None:
        """``topics``: name -> partitions, or ``NAME[:PARTITIONS]`` strings (``partitions`` by default)."""
        specs = [f"{n}:{p}" for n, p in topics.items()] if isinstance(topics, Mapping) else list(topics)
        self.args = [
            python,
            "-m",
            "ivmstream.dev.broker",
            "--partitions",
            str(partitions),
            "--brokers",
            str(brokers),
        ]
        self.args += ["--rebalance-delay-ms", str(rebalance_delay_ms), "--parent-pid", str(os.getpid())]
        for spec in specs:
            self.args += ["--topic", spec]
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._bootstrap: str | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._threads: list[threading.Thread] = []
        self._request_lock = threading.Lock()
        self._out_of_step: str | None = None

    @property
    def process(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise BrokerError("broker process not started")
        return self._proc

    @property
    def bootstrap(self) -> str:
        if self._bootstrap is None:
            raise BrokerError("broker process not started")
        return self._bootstrap

    @property
    def stderr_tail(self) -> str:
        return "".join(self._stderr)

    def start(self) -> BrokerProcess:
        """Spawn the child and wait for its bootstrap line; BrokerError with its stderr if it fails."""
        if self._proc is not None:
            raise BrokerError("broker process already started")
        env = dict(os.environ)
        # bufsize=0: raw pipes, so reader threads hold no buffer lock that could wedge interpreter exit.
        self._proc = subprocess.Popen(
            self.args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env=env,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        for target, stream in (
            (self._read_stdout, self._proc.stdout),
            (self._read_stderr, self._proc.stderr),
        ):
            t = threading.Thread(target=target, args=(stream,), name=f"broker-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)
        try:
            line = self._next_line(self.startup_timeout, "start")
        except BaseException:
            self.stop()
            raise
        self._bootstrap = line
        return self

    def request(self, line: str, timeout: float = 10.0) -> str:
        """Send one protocol line, return the broker's one-line answer (``ok ...`` or ``error ...``)."""
        if "\n" in line:
            raise ValueError("one protocol line at a time")
        proc = self.process
        with self._request_lock:
            if self._out_of_step:
                raise BrokerError(f"broker protocol out of step: no answer to {self._out_of_step} earlier")
            try:
                assert proc.stdin is not None
                data = (line + "\n").encode()
                while data:
                    data = data[proc.stdin.write(data) or 0 :]
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise BrokerError(f"broker stdin closed: {exc}{self._diagnostics()}") from None
            try:
                return self._next_line(timeout, repr(line))
            except BrokerError:
                self._out_of_step = repr(line)  # a late answer would be taken for the next request's
                raise

    def create_topic(
        self, name: str, partitions: int, *, exist_ok: bool = False, timeout: float = 10.0
    ) -> None:
        """Create a topic through the stdin protocol; BrokerError with the broker's code if refused."""
        reply = self.request(f"create {name} {partitions}", timeout)
        if reply == f"ok {name} {partitions}":
            return
        err = self._error(reply)
        if not (exist_ok and err.code == "TOPIC_ALREADY_EXISTS"):
            raise err

    def topics(self, timeout: float = 10.0) -> dict[str, int]:
        """Topic -> partition count from the broker's metadata."""
        reply = self.request("topics", timeout)
        if reply != "ok" and not reply.startswith("ok "):
            raise self._error(reply)
        entries = (item.rpartition(":") for item in reply.split()[1:])
        return {name: int(count) for name, _, count in entries}

    def fault(self, kind: str, *, timeout: float = 10.0, **params: Any) -> str:
        """Inject a wire-level fault (``ivmstream.dev.faults``): ``fault("rtt", broker=1, ms=500)``,
        ``fault("errors", api="Fetch", errors=["NOT_LEADER_FOR_PARTITION"])``, ``fault("down",
        broker="all")``. Returns the answer after ``ok``; BrokerError with the broker's code if refused."""
        reply = self.request(fault_line(kind, **params), timeout)
        if reply == "ok" or reply.startswith("ok "):
            return reply[3:]
        raise self._error(reply)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait up to ``timeout`` s, SIGKILL if needed; returns the exit code (None if never run)."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for t in self._threads:
            t.join(timeout=2.0)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return proc.returncode

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- internals

    def _read_stdout(self, stream: IO[bytes]) -> None:
        buffered = b""
        try:
            while chunk := stream.read(65536):
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                for raw in lines:
                    self._lines.put(raw.decode(errors="replace").rstrip("\r"))
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def _read_stderr(self, stream: IO[bytes]) -> None:
        try:
            while chunk := stream.read(65536):
                self._stderr.append(chunk.decode(errors="replace"))
        except (OSError, ValueError):
            pass

    def _next_line(self, timeout: float, what: str) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise BrokerError(
                f"no answer from broker to {what} within {timeout:g} s{self._diagnostics()}"
            ) from None
        if line is None:
            self._lines.put(None)  # stay at EOF for later callers
            proc = self.process
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2.0)
            raise BrokerError(f"broker closed its stdout during {what}{self._diagnostics()}")
        return line

    def _diagnostics(self) -> str:
        proc = self._proc
        code = proc.poll() if proc is not None else None
        status = f"; exit code {code}" if code is not None else ""
        tail = self.stderr_tail.strip()
        return f"{status}; stderr: {tail}" if tail else status

    @staticmethod
    def _error(reply: str) -> BrokerError:
        """``error CODE: reason`` -> BrokerError(reason, CODE); anything else is reported verbatim."""
        if not reply.startswith("error "):
            return BrokerError(f"unexpected reply from broker: {reply!r}")
        code, sep, reason = reply[len("error ") :].partition(": ")
        if sep and re.fullmatch(r"[A-Z_]+", code):
            return BrokerError(reason, code)
        return BrokerError(reply[len("error ") :])


if __name__ == "__main__":
    sys.exit(main())
