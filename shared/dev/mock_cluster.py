"""librdkafka's mock cluster in this process, driven through ctypes (``MockCluster``).

Limits of the mock, checked against librdkafka's rdkafka_mock.c: brokers listen on 127.0.0.1 only
(INADDR_LOOPBACK, ephemeral port, not configurable); topics created implicitly by a produce or
metadata request get a hard-coded 4 partitions (no setter or ``test.mock.*`` property exists), so
an explicit partition count applies to explicitly created topics only; CreateTopics from an admin client
is not supported (``ivmstream.dev.broker`` takes a line protocol on stdin instead); all data lives in
memory, and each partition keeps at most 5 MiB of message sets (and at most 100,000 of them), silently
dropping the oldest beyond that (``max_size``). A topic that outgrows it loses its head: the ``Worker``
then refuses to start past the deleted records, and the benchmarks compress or size their input to stay
below it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import re
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

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
