"""Embedded Kafka-wire broker: librdkafka's mock cluster, driven through ctypes.

No real Kafka can be installed where ivmstream runs its demo and tests, but the librdkafka bundled in
the confluent-kafka wheel ships a mock cluster that speaks the Kafka protocol well enough for
producers (idempotent too), consumer groups with offset commits and metadata. This module wraps it:

* ``MockCluster`` runs it in the current process;
* ``main`` is the ``python -m ivmstream.dev.broker`` / ``ivmstream broker`` entry point: it prints the
  bootstrap address as the first stdout line, then serves until SIGTERM/SIGINT while answering a
  line protocol on stdin (``create NAME PARTITIONS`` -> ``ok NAME PARTITIONS`` | ``error CODE: why``;
  ``topics`` -> ``ok NAME:PARTITIONS ...``; the wire-level fault commands of ``ivmstream.dev.faults``:
  ``down``/``up`` a broker, ``rtt``, ``errors`` per request type, ``coordinator`` and ``leader`` moves);
* ``BrokerProcess`` runs ``main`` in a child process, for tests and the demo.

Limits of the mock, checked against librdkafka's rdkafka_mock.c: brokers listen on 127.0.0.1 only
(INADDR_LOOPBACK, ephemeral port, not configurable); topics created implicitly by a produce or
metadata request get a hard-coded 4 partitions (no setter or ``test.mock.*`` property exists), so
``--partitions`` applies to explicitly created topics only; CreateTopics from an admin client is not
supported, hence the stdin protocol; all data lives in memory, and each partition keeps at most 5 MiB of
message sets (and at most 100,000 of them), silently dropping the oldest beyond that (``max_size``). A topic
that outgrows it loses its head: the ``Worker`` then refuses to start past the deleted records, and the
benchmarks compress or size their input to stay below it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import ctypes.util
import importlib.util
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
from functools import cache
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

from ivmstream.dev.faults import COMMANDS, fault_line

__all__ = ["BrokerError", "BrokerProcess", "MockCluster", "main"]

PROG = "python -m ivmstream.dev.broker"
MAX_PARTITIONS = 10_000
MAX_BROKERS = 32
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_RD_KAFKA_PRODUCER = 0


class BrokerError(Exception):
    """The mock broker refused or failed an operation; ``code`` is librdkafka's error name if any."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code
        self.reason = message


# --------------------------------------------------------------------------- librdkafka via ctypes


def _library_candidates() -> list[Path]:
    spec = importlib.util.find_spec("confluent_kafka")
    locations = list(spec.submodule_search_locations or []) if spec else []
    found: list[Path] = []
    for location in locations:
        pkg = Path(location)
        for pattern in ("librdkafka*.so*", "librdkafka*.dylib"):
            # manylinux wheels vendor it next to the package, macOS wheels inside it.
            found += sorted((pkg.parent / "confluent_kafka.libs").glob(pattern))
            found += sorted((pkg / ".dylibs").glob(pattern))
    system = ctypes.util.find_library("rdkafka")
    if system:
        found.append(Path(system))
    return found


_i32, _i16 = ctypes.c_int32, ctypes.c_int16
# The mock's fault API (ivmstream.dev.faults): optional, each command checks its own symbol.
_FAULT_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_mock_broker_set_down": (ctypes.c_int, [ctypes.c_void_p, _i32]),
    "rd_kafka_mock_broker_set_up": (ctypes.c_int, [ctypes.c_void_p, _i32]),
    "rd_kafka_mock_broker_set_rtt": (ctypes.c_int, [ctypes.c_void_p, _i32, ctypes.c_int]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [ctypes.c_void_p, _i16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
    ),
    # variadic: (err, rtt_ms) int pairs follow the fixed arguments
    "rd_kafka_mock_broker_push_request_error_rtts": (
        ctypes.c_int,
        [ctypes.c_void_p, _i32, _i16, ctypes.c_size_t],
    ),
    "rd_kafka_mock_broker_error_stack_cnt": (
        ctypes.c_int,
        [ctypes.c_void_p, _i32, _i16, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [ctypes.c_void_p, _i16]),
    "rd_kafka_mock_coordinator_set": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, _i32],
    ),
    "rd_kafka_mock_partition_set_leader": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, _i32, _i32]),
}


@cache
def _lib() -> ctypes.CDLL:
    """Load librdkafka once, preferring the copy confluent-kafka itself uses, and declare signatures."""
    candidates = _library_candidates()
    if not candidates:
        raise BrokerError("librdkafka not found: is confluent-kafka installed in this interpreter?")
    lib = ctypes.CDLL(str(candidates[0]))
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    signatures: dict[str, tuple[Any, list[Any]]] = {
        "rd_kafka_version_str": (cp, []),
        "rd_kafka_err2name": (cp, [ci]),
        "rd_kafka_err2str": (cp, [ci]),
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ci, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_conf_destroy": (None, [vp]),
        "rd_kafka_new": (vp, [ci, vp, cp, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_mock_cluster_new": (vp, [vp, ci]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_cluster_destroy": (None, [vp]),
        "rd_kafka_mock_topic_create": (ci, [vp, cp, ci, ci]),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [vp, ctypes.c_int32]),
        **_FAULT_SIGNATURES,
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name.startswith("rd_kafka_mock_group") or name in _FAULT_SIGNATURES:
                continue  # optional: older librdkafka lacks it (a fault command then says so)
            raise BrokerError(
                f"{candidates[0]} has no {name}: librdkafka too old for a mock cluster"
            ) from None
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def _err_name(code: int) -> str:
    return (_lib().rd_kafka_err2name(code) or b"UNKNOWN").decode()


def _err_str(code: int) -> str:
    return (_lib().rd_kafka_err2str(code) or b"unknown error").decode()


def librdkafka_version() -> str:
    """Version of the librdkafka the mock comes from, for diagnostics."""
    return _lib().rd_kafka_version_str().decode()


# --------------------------------------------------------------------------- validation


def check_topic_name(name: str) -> None:
    """Reject names Kafka would reject; the mock accepts anything, even "" (then clients fail oddly)."""
    if not _TOPIC_RE.fullmatch(name) or name in {".", ".."}:
        raise BrokerError(
            f"invalid topic name {name!r}: use 1-249 characters from [A-Za-z0-9._-], not '.' or '..'",
            "TOPIC_EXCEPTION",
        )


def check_partitions(partitions: int) -> None:
    """The mock aborts the whole process on a negative count and silently accepts 0, so check first."""
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= MAX_PARTITIONS
    ):
        raise BrokerError(
            f"partition count must be an integer in 1..{MAX_PARTITIONS}, got {partitions!r}",
            "INVALID_PARTITIONS",
        )


# --------------------------------------------------------------------------- in-process cluster


class MockCluster:
    """librdkafka's mock cluster in this process; its brokers serve from a librdkafka thread.

    ``with MockCluster(brokers=3) as cluster:`` starts it (or call ``start()``), ``close()`` or
    leaving the block destroys it and every topic in it.
    """

    def __init__(self, brokers: int = 1, *, rebalance_delay_ms: int | None = 0) -> None:
        """``rebalance_delay_ms``: the group.initial.rebalance.delay.ms the mock applies to new groups.

        librdkafka defaults it to 3000 ms like Kafka; 0 lets a consumer group start at once, which is
        what tests and the demo want. ``None`` keeps librdkafka's default.
        """
        self._brokers = brokers
        self._rebalance_delay_ms = rebalance_delay_ms
        self._lock = threading.Lock()
        self._rk: int | None = None
        self._mcluster: int | None = None
        self._bootstrap: str | None = None

    def start(self, brokers: int | None = None) -> MockCluster:
        """Create the rd_kafka_t handle the mock needs and ``brokers`` mock brokers; returns self."""
        brokers = self._brokers if brokers is None else brokers
        if isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= MAX_BROKERS:
            raise BrokerError(f"broker count must be an integer in 1..{MAX_BROKERS}, got {brokers!r}")
        lib = _lib()
        with self._lock:
            if self._mcluster is not None:
                raise BrokerError("mock cluster already started")
            errstr = ctypes.create_string_buffer(512)
            conf = lib.rd_kafka_conf_new()
            # The handle has no bootstrap.servers by design; hide librdkafka's notice-level nag about it.
            lib.rd_kafka_conf_set(conf, b"log_level", b"4", errstr, len(errstr))
            lib.rd_kafka_conf_set(conf, b"client.id", b"ivmstream-mock-broker", errstr, len(errstr))
            rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
            if not rk:
                lib.rd_kafka_conf_destroy(conf)  # rd_kafka_new only takes ownership on success
                raise BrokerError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
            mcluster = lib.rd_kafka_mock_cluster_new(rk, brokers)
            if not mcluster:
                lib.rd_kafka_destroy(rk)
                raise BrokerError(f"rd_kafka_mock_cluster_new failed for {brokers} broker(s); see stderr")
            if self._rebalance_delay_ms is not None and hasattr(
                lib, "rd_kafka_mock_group_initial_rebalance_delay_ms"
            ):
                lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mcluster, self._rebalance_delay_ms)
            self._rk, self._mcluster, self._brokers = rk, mcluster, brokers
            self._bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        return self

    @property
    def started(self) -> bool:
        return self._mcluster is not None

    @property
    def brokers(self) -> int:
        return self._brokers

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients, e.g. ``127.0.0.1:40123`` (comma-separated if several)."""
        if self._bootstrap is None or self._mcluster is None:
            raise BrokerError("mock cluster is not running")
        return self._bootstrap

    def create_topic(self, name: str, partitions: int, replication_factor: int = 1) -> None:
        """Create a topic with exactly ``partitions`` partitions; BrokerError (e.g. TOPIC_ALREADY_EXISTS)."""
        check_topic_name(name)
        check_partitions(partitions)
        if not 1 <= replication_factor <= self._brokers:
            raise BrokerError(
                f"replication factor must be in 1..{self._brokers} (broker count), got {replication_factor}",
                "INVALID_REPLICATION_FACTOR",
            )
        with self._lock:
            if self._mcluster is None:
                raise BrokerError("mock cluster is not running")
            err = _lib().rd_kafka_mock_topic_create(
                self._mcluster, name.encode(), partitions, replication_factor
            )
        if err:
            raise BrokerError(f"cannot create topic {name!r}: {_err_str(err)}", _err_name(err))

    def has_symbol(self, symbol: str) -> bool:
        """Whether the loaded librdkafka exports ``symbol`` (fault commands need one each)."""
        return hasattr(_lib(), symbol)

    def call_mock(self, symbol: str, *args: Any) -> int:
        """Call a mock-cluster function with this cluster first; its rd_kafka_resp_err_t (0 if void)."""
        with self._lock:
            if self._mcluster is None:
                raise BrokerError("mock cluster is not running")
            return int(getattr(_lib(), symbol)(self._mcluster, *args) or 0)

    def fault(self, words: Sequence[str]) -> str:
        """Run one fault command (``ivmstream.dev.faults``) given as words; the answer after ``ok``."""
        from ivmstream.dev.faults import FaultError, run_fault

        try:
            answer = run_fault(self, _lib(), list(words)) if words else None
        except FaultError as exc:
            raise BrokerError(exc.reason, exc.code) from None
        if answer is None:
            raise BrokerError(f"unknown fault command {' '.join(words)!r}", "INVALID_REQUEST")
        return answer

    def list_topics(self, timeout: float = 5.0) -> dict[str, int]:
        """Topic -> partition count as clients see it (includes auto-created topics)."""
        from confluent_kafka.admin import AdminClient  # lazy: only this query needs a client

        try:
            metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=timeout)
        except Exception as exc:  # KafkaException carries librdkafka's error
            raise BrokerError(f"metadata request failed: {exc}") from exc
        return {name: len(t.partitions) for name, t in sorted(metadata.topics.items())}

    def close(self) -> None:
        """Destroy the cluster (closing client connections), then the handle; safe to call twice."""
        with self._lock:
            mcluster, rk = self._mcluster, self._rk
            self._mcluster = self._rk = self._bootstrap = None
        if mcluster:
            _lib().rd_kafka_mock_cluster_destroy(mcluster)
        if rk:
            _lib().rd_kafka_destroy(rk)

    def __enter__(self) -> MockCluster:
        if not self.started:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


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
