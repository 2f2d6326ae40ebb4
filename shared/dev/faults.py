"""Wire-level faults for the embedded broker: the commands of its control channel, and their client side.

librdkafka's mock cluster can misbehave on request: a broker goes down (closes its connections and
refuses new ones) and comes back, answers late, answers chosen requests with chosen error codes, hands
a consumer group to another coordinator or a partition to another leader. ``python -m
ivmstream.dev.broker`` exposes these on stdin, beside ``create`` and ``topics``, one line per command and
one line per answer (``ok ...`` or ``error CODE: why``):

=================================================  ===================================================
``down BROKER``                                    BROKER (an id from 1, or ``all``) drops its
                                                   connections and refuses new ones
``up BROKER``                                      it accepts connections again
``rtt BROKER MS``                                  every response of BROKER is delayed by MS ms
                                                   (0 removes the delay)
``errors API ERR[,ERR...]``                        the next requests of type API, to any broker, are
                                                   answered with these errors, one each, in order
``broker-errors BROKER API ERR[:MS][,ERR[:MS]...]``  the same on one broker, each answer delayed by MS
``pending BROKER API``                             ``ok N``: errors ``broker-errors`` stacked on BROKER
                                                   for API that no request has consumed yet
``clear API``                                      forget the ``errors`` still stacked for API
``coordinator GROUP BROKER``                       BROKER becomes the coordinator of consumer group
                                                   GROUP (the old one answers NOT_COORDINATOR)
``leader TOPIC PARTITION BROKER``                  BROKER becomes the partition's leader (the others
                                                   answer NOT_LEADER_FOR_PARTITION); data stays
``faults``                                         ``ok`` and the fault commands this librdkafka offers
=================================================  ===================================================

API is a request type by name (``Produce``, ``Fetch``, ``OffsetCommit``, ``JoinGroup``, ``SyncGroup``,
``Heartbeat``, ``FindCoordinator`` and the others in ``API_KEYS``) or by its protocol number. ERR is a
librdkafka error name (``NOT_COORDINATOR``, ``REBALANCE_IN_PROGRESS``, ``_TRANSPORT`` to drop the
connection instead of answering) or a number. Each command needs one symbol of librdkafka; one the
bundled build lacks is answered ``error UNSUPPORTED: ...`` naming the symbol.

``fault_line`` builds these lines from keyword arguments, so tests write
``broker.fault("rtt", broker=1, ms=500)`` (``BrokerProcess.fault``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

__all__ = ["API_KEYS", "COMMANDS", "FaultError", "api_key", "error_code", "fault_line", "run_fault"]

# Kafka protocol request types (ApiKey), by the names the protocol guide uses.
API_KEYS: dict[str, int] = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "SyncGroup": 14,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "ApiVersions": 18,
    "InitProducerId": 22,
    "OffsetForLeaderEpoch": 23,
}
MAX_STACKED = 1000  # errors per command: enough for any script, small enough to refuse a typo'd count
MAX_DELAY_MS = 600_000


class FaultError(Exception):
    """A fault command that cannot be run; ``code`` is the protocol's error code for the answer."""

    def __init__(self, message: str, code: str = "INVALID_REQUEST") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.reason = message


class FaultTarget(Protocol):
    """What the commands drive: ``ivmstream.dev.broker.MockCluster``."""

    @property
    def brokers(self) -> int: ...

    def call_mock(self, symbol: str, *args: Any) -> int: ...

    def has_symbol(self, symbol: str) -> bool: ...


# --------------------------------------------------------------------------- names


class _ErrDesc(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("name", ctypes.c_char_p), ("desc", ctypes.c_char_p)]


@cache
def _error_names(lib: ctypes.CDLL) -> dict[str, int]:
    """librdkafka's error names (``NOT_COORDINATOR``, ``_TRANSPORT``) -> codes, from its own table."""
    get = lib.rd_kafka_get_err_descs
    get.restype = None
    get.argtypes = [ctypes.POINTER(ctypes.POINTER(_ErrDesc)), ctypes.POINTER(ctypes.c_size_t)]
    table = ctypes.POINTER(_ErrDesc)()
    count = ctypes.c_size_t()
    get(ctypes.byref(table), ctypes.byref(count))
    return {table[i].name.decode(): table[i].code for i in range(count.value) if table[i].name}


def error_code(lib: ctypes.CDLL, text: str) -> int:
    """An error given by name or number; names are librdkafka's (``NOT_LEADER_FOR_PARTITION``)."""
    names = _error_names(lib)
    if text in names:
        return names[text]
    try:
        code = int(text)
    except ValueError:
        raise FaultError(
            f"unknown error {text!r}: use a librdkafka error name such as NOT_COORDINATOR or a number",
            "INVALID_ERROR",
        ) from None
    if code not in names.values():
        raise FaultError(f"unknown error code {code}", "INVALID_ERROR")
    return code


def api_key(text: str) -> int:
    """A request type by name (``Fetch``) or protocol number (``1``)."""
    if text in API_KEYS:
        return API_KEYS[text]
    try:
        key = int(text)
    except ValueError:
        raise FaultError(
            f"unknown request type {text!r}: use one of {', '.join(API_KEYS)} or a number", "INVALID_API"
        ) from None
    if not 0 <= key <= 32767:
        raise FaultError(f"request type must be in 0..32767, got {key}", "INVALID_API")
    return key


def _broker(target: FaultTarget, text: str, *, allow_all: bool) -> int:
    """A mock broker id (1..brokers), or -1 for ``all`` where the call accepts it."""
    if allow_all and text == "all":
        return -1
    try:
        broker = int(text)
    except ValueError:
        broker = 0
    if not 1 <= broker <= target.brokers:
        also = " or 'all'" if allow_all else ""
        raise FaultError(f"broker must be an id in 1..{target.brokers}{also}, got {text!r}", "INVALID_BROKER")
    return broker


def _count(text: str, what: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise FaultError(f"{what} must be an integer in {low}..{high}, got {text!r}", "INVALID_REQUEST")
    return value


def _error_list(lib: ctypes.CDLL, text: str, *, delays: bool) -> list[tuple[int, int]]:
    """``ERR[:MS],...`` -> [(code, delay ms)]; delays only where the call takes them."""
    items = [item for item in text.split(",") if item]
    if not 1 <= len(items) <= MAX_STACKED:
        raise FaultError(f"give 1..{MAX_STACKED} comma-separated errors, got {len(items)}")
    out = []
    for item in items:
        name, sep, ms = item.partition(":")
        if sep and not delays:
            raise FaultError(f"{item!r}: per-error delays need broker-errors")
        out.append((error_code(lib, name), _count(ms, "delay (ms)", 0, MAX_DELAY_MS) if sep else 0))
    return out


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class Command:
    """One fault command: its argument names (for usage and ``fault_line``), its librdkafka symbol and
    what runs it (argument words in, the answer's words after ``ok`` out)."""

    params: tuple[str, ...]
    symbol: str
    run: Callable[[FaultTarget, ctypes.CDLL, Sequence[str]], str]

    def usage(self, name: str) -> str:
        return " ".join([name, *(p.upper() for p in self.params)])


def _down(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    _checked(lib, target.call_mock("rd_kafka_mock_broker_set_down", _broker(target, args[0], allow_all=True)))
    return f"down {args[0]}"


def _up(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    _checked(lib, target.call_mock("rd_kafka_mock_broker_set_up", _broker(target, args[0], allow_all=True)))
    return f"up {args[0]}"


def _rtt(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    broker = _broker(target, args[0], allow_all=True)
    ms = _count(args[1], "delay (ms)", 0, MAX_DELAY_MS)
    _checked(lib, target.call_mock("rd_kafka_mock_broker_set_rtt", broker, ms))
    return f"rtt {args[0]} {ms}"


def _errors(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    key = api_key(args[0])
    codes = [code for code, _ms in _error_list(lib, args[1], delays=False)]
    array = (ctypes.c_int * len(codes))(*codes)
    target.call_mock("rd_kafka_mock_push_request_errors_array", key, len(codes), array)
    return f"errors {args[0]} {len(codes)}"


def _broker_errors(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    broker = _broker(target, args[0], allow_all=False)
    key = api_key(args[1])
    pairs = _error_list(lib, args[2], delays=True)
    flat = [ctypes.c_int(v) for pair in pairs for v in pair]  # the variadic (err, rtt_ms) tuples
    symbol = "rd_kafka_mock_broker_push_request_error_rtts"
    _checked(lib, target.call_mock(symbol, broker, key, len(pairs), *flat))
    return f"broker-errors {args[0]} {args[1]} {len(pairs)}"


def _pending(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    broker = _broker(target, args[0], allow_all=False)
    count = ctypes.c_size_t()
    err = target.call_mock(
        "rd_kafka_mock_broker_error_stack_cnt", broker, api_key(args[1]), ctypes.byref(count)
    )
    _checked(lib, err)
    return str(count.value)


def _clear(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    target.call_mock("rd_kafka_mock_clear_request_errors", api_key(args[0]))
    return f"clear {args[0]}"


def _coordinator(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    group, broker = args[0], _broker(target, args[1], allow_all=False)
    _checked(lib, target.call_mock("rd_kafka_mock_coordinator_set", b"group", group.encode(), broker))
    return f"coordinator {group} {broker}"


def _leader(target: FaultTarget, lib: ctypes.CDLL, args: Sequence[str]) -> str:
    topic = args[0]
    partition = _count(args[1], "partition", 0, 1_000_000)
    broker = _broker(target, args[2], allow_all=False)
    _checked(lib, target.call_mock("rd_kafka_mock_partition_set_leader", topic.encode(), partition, broker))
    return f"leader {topic} {partition} {broker}"


COMMANDS: dict[str, Command] = {
    "down": Command(("broker",), "rd_kafka_mock_broker_set_down", _down),
    "up": Command(("broker",), "rd_kafka_mock_broker_set_up", _up),
    "rtt": Command(("broker", "ms"), "rd_kafka_mock_broker_set_rtt", _rtt),
    "errors": Command(("api", "errors"), "rd_kafka_mock_push_request_errors_array", _errors),
    "broker-errors": Command(
        ("broker", "api", "errors"), "rd_kafka_mock_broker_push_request_error_rtts", _broker_errors
    ),
    "pending": Command(("broker", "api"), "rd_kafka_mock_broker_error_stack_cnt", _pending),
    "clear": Command(("api",), "rd_kafka_mock_clear_request_errors", _clear),
    "coordinator": Command(("group", "broker"), "rd_kafka_mock_coordinator_set", _coordinator),
    "leader": Command(("topic", "partition", "broker"), "rd_kafka_mock_partition_set_leader", _leader),
}


def _checked(lib: ctypes.CDLL, err: int) -> None:
    """A mock call's rd_kafka_resp_err_t: nonzero becomes a FaultError with librdkafka's name and text."""
    if err:
        raise FaultError(lib.rd_kafka_err2str(err).decode(), lib.rd_kafka_err2name(err).decode())


def run_fault(target: FaultTarget, lib: ctypes.CDLL, words: Sequence[str]) -> str | None:
    """Run one control-channel line if it is a fault command: the answer after ``ok``, else None."""
    if words[0] == "faults":
        if len(words) != 1:
            raise FaultError("usage: faults")
        return " ".join(name for name, c in COMMANDS.items() if target.has_symbol(c.symbol))
    command = COMMANDS.get(words[0])
    if command is None:
        return None
    if len(words) != 1 + len(command.params):
        raise FaultError(f"usage: {command.usage(words[0])}")
    if not target.has_symbol(command.symbol):
        missing = f"this librdkafka has no {command.symbol}, so '{words[0]}' is unavailable"
        raise FaultError(missing, "UNSUPPORTED")
    return command.run(target, lib, words[1:])


def fault_line(kind: str, **params: Any) -> str:
    """The control-channel line for a fault given by keyword: ``fault_line("rtt", broker=1, ms=500)``.

    ``errors`` is a list of error names (or ``(name, ms)`` pairs for ``broker-errors``)."""
    command = COMMANDS.get(kind)
    if command is None:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(COMMANDS)}")
    if set(params) != set(command.params):
        raise ValueError(f"fault {kind!r} takes {', '.join(command.params)}, got {', '.join(sorted(params))}")
    words = [kind]
    for name in command.params:
        value = params[name]
        if name == "errors":
            value = ",".join(e if isinstance(e, str) else f"{e[0]}:{e[1]}" for e in value)
        text = str(value)
        if not text or any(c.isspace() for c in text):
            raise ValueError(f"fault {kind!r}: {name} {value!r} must be one word")
        words.append(text)
    return " ".join(words)
