"""Refused input: every refused record, whatever refused it (the codec, the keyless-partition check, a
sharded query's routing, an engine), takes one path to the dead-letter topic: the compiled loop of
``Output.dead_letter_decoded`` (shared/runtime/_deadletters.c), which costs a refused record its
produce call and little else. The same code runs at every log level: each dead letter carries its
reason, detail and source, so the log says only how many per reason and batch."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import Message

from ivmstream.events import EventError, UpdateEvent
from ivmstream.runtime.hooks import Hooks, RecordsRefused, fire
from ivmstream.runtime.output import Output

log = logging.getLogger("ivmstream.runtime")


class Refusals:
    """Dead-letters refused records and reports them (``Hooks.records_refused``: metrics count them)."""

    def __init__(self, output: Output, hooks: Hooks) -> None:
        self.output = output
        self.hooks = hooks

    def decoded(
        self, topic: str, partition: int, msgs: Sequence[Message], decoded: Sequence[UpdateEvent | EventError]
    ) -> None:
        """Dead-letter the records of ``topic:partition`` whose decoded item is an ``EventError``."""
        counts = self.output.dead_letter_decoded(topic, partition, msgs, decoded, UpdateEvent)  # type: ignore[arg-type]
        if counts:
            log.debug("%s:%d: dead-lettered %s", topic, partition, counts)
            if self.hooks.records_refused:
                fire(self.hooks.records_refused, RecordsRefused(topic, partition, counts))

    def records(self, topic: str, partition: int, refused: Sequence[tuple[Message, str, str]]) -> None:
        """Dead-letter each ``(record, reason code, detail)`` of ``topic:partition``."""
        if refused:
            self.decoded(
                topic, partition, [m for m, _c, _d in refused], [EventError(c, d) for _m, c, d in refused]
            )
