"""Dead-lettering a decoded batch: the compiled loop (shared/runtime/_deadletters.c) does what the Python
one does, record for record: the same produce calls, headers, order, retries and reason counts."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from ivmstream.events import EventError, UpdateEvent
from ivmstream.runtime import output as output_module
from ivmstream.runtime.output import DeliveryFailed, Output
from tests.unit.extension_checks import require_built

require_built(
    output_module._deadletters,
    "dead-letter loop",
    "ivmstream.runtime._deadletters",
    "shared/runtime/_deadletters.c",
)

REASONS = ["oversized", "null-value", "malformed-json", "wrong-type"]


class Msg:
    """The parts of a consumed record a dead letter reads."""

    def __init__(self, offset: int, value: bytes | None, key: bytes | None) -> None:
        self._offset, self._value, self._key = offset, value, key

    def topic(self) -> str:
        return "in.é"

    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key


class Recorder:
    """A producer that records what it is given; the produce calls listed in ``refuse`` (by call number)
    raise the given exception once each."""

    def __init__(self, refuse: dict[int, BaseException] | None = None) -> None:
        self.refuse = dict(refuse or {})
        self.calls = 0
        self.sent: list[tuple[Any, ...]] = []

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:  # confluent_kafka.Producer.produce's parameters, by position or by name
        self.calls += 1
        exc = self.refuse.pop(self.calls, None)
        if exc is not None:
            raise exc
        assert partition == -1 and timestamp == 0 and (callback or on_delivery) is not None
        self.sent.append((topic, value, key, list(headers)))

    def poll(self, _timeout: float) -> int:
        return 0


def batch(seed: int, n: int, records: str = "python") -> tuple[list[Any], list[Any]]:
    """``records``: "python" (Msg), "kafka" (confluent_kafka's own Message type, whose accessors the
    compiled loop calls through their method descriptors) or "mixed" (both, a Message first)."""
    rng = random.Random(seed)
    msgs: list[Any] = []
    decoded: list[Any] = []
    for i in range(n):
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 30))
        key = rng.choice([None, b"k", b"\xff\x00"])
        kafka = records == "kafka" or (records == "mixed" and (i == 0 or rng.random() < 0.5))
        if kafka:
            msgs.append(Message(topic="in.é", partition=2, offset=100 + i, key=key, value=value))
        else:
            msgs.append(Msg(100 + i, value, key))
        if rng.random() < 0.4:
            decoded.append(UpdateEvent("r", {"a": i}, 1, "k"))
        else:
            detail = rng.choice(["fixed", f"varies {i}", "é ünïcode", ""])
            decoded.append(EventError(rng.choice(REASONS), detail))
    return msgs, decoded


def run(compiled: bool, msgs: list[Msg], decoded: list[Any], producer: Recorder, monkeypatch: Any) -> Any:
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(output_module, "_deadletters", None)
        out = Output("svc", producer, "out", "dlq", None)  # type: ignore[arg-type]
        return out.dead_letter_decoded("in.é", 2, msgs, decoded, UpdateEvent)  # type: ignore[arg-type]


@pytest.mark.parametrize("records", ["python", "kafka", "mixed"])
@pytest.mark.parametrize("seed", range(5))
def test_the_compiled_loop_sends_what_the_python_loop_sends(
    seed: int, records: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs, decoded = batch(seed, 300, records)
    sent = {}
    for compiled in (True, False):
        producer = Recorder()
        counts = run(compiled, msgs, decoded, producer, monkeypatch)
        errors = [e for e in decoded if isinstance(e, EventError)]
        assert counts == Counter(e.code for e in errors)
        sent[compiled] = producer.sent
    assert sent[True] == sent[False]
    refused = [(m, e) for m, e in zip(msgs, decoded, strict=True) if isinstance(e, EventError)]
    assert len(sent[True]) == len(refused)
    for (topic, value, key, headers), (msg, err) in zip(sent[True], refused, strict=True):
        assert (topic, value, key) == ("dlq", msg.value() or b"", msg.key())
        assert headers == [
            ("ivmstream.reason", err.code.encode()),
            ("ivmstream.detail", err.detail.encode()),
            ("ivmstream.service", b"svc"),
            ("ivmstream.source", f"in.é:2:{msg.offset()}".encode()),
        ]


@pytest.mark.parametrize("compiled", [True, False])
def test_a_full_queue_is_waited_on_and_a_refused_produce_stops_the_worker(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    msgs, decoded = batch(7, 40)
    producer = Recorder({2: BufferError("queue full"), 5: BufferError("queue full")})
    counts = run(compiled, msgs, decoded, producer, monkeypatch)
    assert sum(counts.values()) == len(producer.sent) == sum(isinstance(e, EventError) for e in decoded)
    gone = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(DeliveryFailed, match="cannot publish to dlq"):
        run(compiled, msgs, decoded, Recorder({1: gone, 2: gone}), monkeypatch)
    with pytest.raises(ZeroDivisionError):  # anything else is not the producer's refusal: it propagates
        run(compiled, msgs, decoded, Recorder({3: ZeroDivisionError()}), monkeypatch)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_detail_cache_stays_bounded(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_module, "_DETAILS_KEPT", 8)
    if not compiled:
        monkeypatch.setattr(output_module, "_deadletters", None)
    msgs = [Msg(i, b"v", None) for i in range(50)]
    decoded: list[Any] = [EventError("wrong-type", f"detail {i}") for i in range(50)]
    producer = Recorder()
    out = Output("svc", producer, "out", "dlq", None)  # type: ignore[arg-type]
    assert out.dead_letter_decoded("in.é", 2, msgs, decoded, UpdateEvent) == {"wrong-type": 50}  # type: ignore[arg-type]
    assert len(out._detail_headers) <= 8
    assert [h[1][1] for *_, h in producer.sent] == [f"detail {i}".encode() for i in range(50)]


def test_many_distinct_reasons_are_all_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """More distinct codes in one batch than the compiled loop counts in its array (engines add their own)."""
    rng = random.Random(3)
    codes = [f"code-{i}" for i in range(150)]
    decoded: list[Any] = [EventError(rng.choice(codes), "d") for _ in range(2000)]
    msgs = [Msg(i, b"v", None) for i in range(len(decoded))]
    expected = Counter(e.code for e in decoded)
    for compiled in (True, False):
        assert run(compiled, msgs, decoded, Recorder(), monkeypatch) == expected


@pytest.mark.parametrize("records", ["python", "kafka"])
def test_long_values_and_keys_are_cut_with_their_length_in_a_header(
    records: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead letter carries at most dead_letter_max_bytes of the value (and a bounded key), so it always
    fits the producer's message size limit; the full lengths travel in headers."""
    monkeypatch.setattr(output_module, "DEAD_LETTER_KEY_MAX_BYTES", 1)
    msgs, decoded = batch(11, 300, records)
    sent = {}
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(output_module, "_deadletters", None)
            producer = Recorder()
            out = Output("svc", producer, "out", "dlq", None, dead_letter_max_bytes=20)  # type: ignore[arg-type]
            out.dead_letter_decoded("in.é", 2, msgs, decoded, UpdateEvent)
            sent[compiled] = producer.sent
    assert sent[True] == sent[False]
    refused = [msg for msg, e in zip(msgs, decoded, strict=True) if isinstance(e, EventError)]
    cut_values = cut_keys = 0
    for (_, value, key, headers), msg in zip(sent[True], refused, strict=True):
        full, full_key = msg.value() or b"", msg.key()
        extra = dict(headers[4:])
        assert value == full[:20] and (key is None or key == full_key[:1])
        assert extra.get("ivmstream.truncated") == (str(len(full)).encode() if len(full) > 20 else None)
        long_key = full_key is not None and len(full_key) > 1
        assert extra.get("ivmstream.key-truncated") == (str(len(full_key)).encode() if long_key else None)
        cut_values += len(full) > 20
        cut_keys += long_key
    assert cut_values > 10 and cut_keys > 10  # both cuts were exercised


def test_a_list_of_dead_letters_keeps_every_header_and_the_refusal_handling() -> None:
    """``Output.dead_letters``, the path of an engine's refusals: one produce per record with the four
    headers; a full queue is waited on, a refused produce stops the worker in one line."""
    producer = Recorder({2: BufferError("queue full")})
    out = Output("svc", producer, "out", "dlq", None)  # type: ignore[arg-type]
    refused = [
        (Msg(i, b"v%d" % i, b"k"), ("oversized", "null-value")[i % 2], f"detail {i}") for i in range(4)
    ]
    out.dead_letters(refused)  # type: ignore[arg-type]
    assert [(t, v, k) for t, v, k, _ in producer.sent] == [("dlq", b"v%d" % i, b"k") for i in range(4)]
    for (_, _, _, headers), (msg, code, detail) in zip(producer.sent, refused, strict=True):
        assert dict(headers) == {
            "ivmstream.reason": code.encode(),
            "ivmstream.detail": detail.encode(),
            "ivmstream.service": b"svc",
            "ivmstream.source": f"in.é:2:{msg.offset()}".encode(),
        }
    gone = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(DeliveryFailed, match="cannot publish to dlq"):
        Output("svc", Recorder({1: gone, 2: gone}), "out", "dlq", None).dead_letters(refused)  # type: ignore[arg-type]
