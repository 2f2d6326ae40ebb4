"""``ivmstream dlq``: a service's dead letters, every partition of its dead-letter topic, each with its
reason, detail, source record and size."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from ivmstream.cli.common import (
    BOOTSTRAP_HELP,
    CliError,
    add_config_argument,
    add_service_argument,
    load,
    print_json,
    services_epilog,
)

PREVIEW_CHARS = 160


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dlq",
        help="print a service's dead letters (refused input records)",
        description="Read every partition of the service's dead-letter topic from its start and print each "
        "dead letter: where it sits, the reason code, the detail, the refused record's source "
        "(topic:partition:offset), its size and, where the worker cut a long value, the length it was cut "
        "from; then a count per reason on stderr.",
        epilog_fn=services_epilog,
    )
    add_service_argument(p)
    p.add_argument("--bootstrap", required=True, metavar="ADDR", help=BOOTSTRAP_HELP)
    add_config_argument(p, "the service's defaults; it names a non-default dlq_topic and kafka settings")
    p.add_argument("--topic", help="the dead-letter topic (default: the config's dlq_topic, <service>.dlq)")
    p.add_argument(
        "--follow", action="store_true", help="keep printing dead letters as they arrive, until Ctrl-C"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per dead letter (dlq, source, reason, detail, size, truncated_from, value)",
    )
    p.set_defaults(func=cmd_dlq)


def cmd_dlq(args: argparse.Namespace) -> int:
    from ivmstream.runtime.kafka import check_reachable, partition_count

    _service, config = load(args.service, args.config)
    topic = args.topic or config.dlq_topic
    kafka = config.kafka.get("consumer", {})
    check_reachable(args.bootstrap, overrides=kafka)
    if partition_count(args.bootstrap, topic, overrides=kafka) is None:
        raise CliError(
            f"no topic {topic} at {args.bootstrap}: no dead letter was written yet (the worker writes the "
            "first one there), or the service's dlq_topic is another (--config, --topic)"
        )
    reasons: Counter[str] = Counter()
    try:
        for where, letter in _dead_letters(args.bootstrap, topic, args.follow, kafka):
            reasons[letter.reason] += 1
            if args.json:
                print_json(_as_json(where, letter))
            else:
                print(_as_text(where, letter), flush=True)
    except KeyboardInterrupt:
        pass
    summary = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
    print(
        f"{sum(reasons.values())} dead letters in {topic}" + (f": {summary}" if summary else ""),
        file=sys.stderr,
    )
    return 0


def _size(letter: Any) -> int:
    return letter.truncated_from if letter.truncated_from is not None else len(letter.value)


def _as_json(where: str, letter: Any) -> dict[str, Any]:
    return {
        "dlq": where,
        "source": f"{letter.topic}:{letter.partition}:{letter.offset}",
        "reason": letter.reason,
        "detail": letter.detail,
        "size": _size(letter),
        "truncated_from": letter.truncated_from,
        "value": letter.value.decode(errors="replace"),
    }


def _as_text(where: str, letter: Any) -> str:
    """Two lines: the letter's place, source, reason, detail and size; then the start of the refused
    value."""
    cut = f", cut to {len(letter.value)}" if letter.truncated_from is not None else ""
    head = (
        f"{where} source {letter.topic}:{letter.partition}:{letter.offset} {letter.reason}: {letter.detail} "
        f"({_size(letter)} bytes{cut})"
    )
    text = letter.value.decode(errors="replace")
    preview = text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."
    return f"{head}\n    {preview}"


def _dead_letters(bootstrap: str, topic: str, follow: bool, kafka: Any) -> Iterator[tuple[str, Any]]:
    """``(dlq_topic:partition:offset, DeadLetter)`` of every partition from its start: up to the current
    end, or on and on with ``follow``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from ivmstream.runtime.dlq import dead_letter_of, reader_settings

    consumer = Consumer(reader_settings(bootstrap, kafka))
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in meta.partitions
        }
        todo = {p: hi for p, (lo, hi) in ends.items() if hi > lo}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(ends)])
        while todo or follow:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    continue
                partition, offset = msg.partition(), msg.offset()
                if offset + 1 >= todo.get(partition, 0):
                    todo.pop(partition, None)
                letter = dead_letter_of(msg)
                if letter is not None:
                    yield f"{topic}:{partition}:{offset}", letter
    finally:
        consumer.close()
