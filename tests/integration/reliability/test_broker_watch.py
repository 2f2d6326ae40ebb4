"""BrokerWatch: when a worker gives up on an unreachable cluster (shared/runtime/kafka.py)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ivmstream.runtime.kafka import BrokerUnavailable, BrokerWatch
from ivmstream.runtime.rebalance import committed_offset

ALL_DOWN = KafkaError(KafkaError._ALL_BROKERS_DOWN)


def _watch(timeout: float | None, answers: bool = False) -> tuple[BrokerWatch, list[int]]:
    probes: list[int] = []

    def probe() -> bool:
        probes.append(1)
        return answers

    return BrokerWatch("127.0.0.1:9", timeout, probe), probes


def _down_for(watch: BrokerWatch, seconds: float) -> None:
    """As if the all-brokers-down error came ``seconds`` ago (no sleeping in tests)."""
    watch.on_error(ALL_DOWN)
    assert watch.down_since is not None
    watch.down_since = time.monotonic() - seconds


def test_gives_up_past_the_timeout_with_one_line_when_the_probe_fails():
    watch, probes = _watch(5.0)
    _down_for(watch, 6.0)
    with pytest.raises(BrokerUnavailable) as gone:
        watch.check()
    assert probes == [1]
    message = str(gone.value)
    assert "\n" not in message
    assert message.startswith("no Kafka broker reachable at 127.0.0.1:9 for 6 s (broker_timeout 5 s)")


def test_within_the_timeout_nothing_is_asked_or_raised():
    watch, probes = _watch(5.0)
    _down_for(watch, 4.0)
    watch.check()
    assert probes == [] and watch.down_since is not None


def test_a_probe_that_is_answered_ends_the_outage():
    watch, probes = _watch(5.0, answers=True)
    _down_for(watch, 60.0)
    watch.check()
    assert probes == [1] and watch.down_since is None


def test_statistics_with_a_broker_up_end_the_outage_and_others_do_not():
    watch, _ = _watch(5.0)
    _down_for(watch, 60.0)
    watch.on_stats({"brokers": {"b/1": {"state": "DOWN"}, "b/bootstrap": {"state": "CONNECT"}}})
    assert watch.down_since is not None
    watch.on_stats({"brokers": {"b/1": {"state": "UP"}}})
    assert watch.down_since is None
    watch.check()


def test_a_later_all_down_error_keeps_the_first_start():
    watch, _ = _watch(5.0)
    _down_for(watch, 3.0)
    first = watch.down_since
    watch.on_error(ALL_DOWN)
    assert watch.down_since == first


def test_other_client_errors_do_not_start_an_outage():
    watch, _ = _watch(5.0)
    watch.on_error(KafkaError(KafkaError._TRANSPORT))
    assert watch.down_since is None


def test_no_timeout_means_retry_forever():
    watch, probes = _watch(None)
    _down_for(watch, 10_000.0)
    watch.check()
    assert probes == []


class _Unanswered:
    """A consumer whose ``committed`` times out ``failures`` times (fault injection), then answers."""

    def __init__(self, failures: int, fatal: bool = False) -> None:
        self.failures = failures
        self.error = KafkaError(KafkaError._FATAL if fatal else KafkaError._TIMED_OUT, fatal=fatal)
        self.calls = 0

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(self.error)
        return [TopicPartition(tps[0].topic, tps[0].partition, 42)]


def _ask(consumer: _Unanswered, timeout: float | None) -> int:
    return committed_offset(consumer, TopicPartition("t", 0), _watch(timeout)[0], threading.Event())  # type: ignore[arg-type]


def test_an_assignment_asks_again_for_the_committed_offset_while_kafka_does_not_answer():
    consumer = _Unanswered(failures=2)
    offset = _ask(consumer, 60.0)
    assert (offset, consumer.calls) == (42, 3)


def test_an_assignment_kafka_never_answers_stops_like_an_outage_past_the_timeout():
    consumer = _Unanswered(failures=10**6)
    with pytest.raises(BrokerUnavailable) as gone:
        _ask(consumer, 0.0)
    message = str(gone.value)
    assert "\n" not in message and consumer.calls == 1
    assert (
        message.startswith("no Kafka broker reachable at 127.0.0.1:9 for ")
        and "(broker_timeout 0 s)" in message
    )


def test_a_fatal_error_is_not_retried():
    consumer = _Unanswered(failures=10**6, fatal=True)
    with pytest.raises(KafkaException):
        _ask(consumer, 60.0)
    assert consumer.calls == 1
