"""Fan-out of result changes to subscribers: one listener on the source, however many subscribers.

Each change names a view and the keys a worker's write changed; the hub reads those keys' records once
and puts each on the queue of every subscriber that wants it. A subscriber that falls ``QUEUE_SIZE``
records behind is told so and dropped (its client reconnects and reads the current results), so one
slow client never holds memory for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from ivmstream.serve.sources import Record, ResultSource

log = logging.getLogger("ivmstream.serve")

QUEUE_SIZE = 1000
LAGGING = {"error": "this subscriber fell too far behind; subscribe again"}


@dataclass(eq=False)
class Subscriber:
    view: str
    key: str | None  # None: every key of the view
    queue: asyncio.Queue[Record] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    dropped: bool = False


class Hub:
    def __init__(self, source: ResultSource) -> None:
        self.source = source
        self.subscribers: set[Subscriber] = set()
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()  # set once the listener is subscribed

    def subscribe(self, view: str, key: str | None) -> Subscriber:
        sub = Subscriber(view, key)
        self.subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)

    def start(self) -> None:
        self._task = asyncio.create_task(self._listen())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        """Listen for changes for as long as the server runs, reconnecting after a lost connection."""
        while True:
            try:
                async for view, keys in self.source.changes(self.ready.set):
                    await self._dispatch(view, keys)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the source went away: listen again shortly
                log.warning("listening for result changes failed (%s); retrying in 1s", exc)
                await asyncio.sleep(1.0)

    async def _dispatch(self, view: str, keys: list[str]) -> None:
        wanted = [s for s in self.subscribers if s.view == view]
        if not wanted:
            return
        named = {s.key for s in wanted if s.key is not None}
        every = any(s.key is None for s in wanted)
        records = await self.source.get_many(view, [k for k in keys if every or k in named])
        for sub in wanted:
            for key, record in records.items():
                if sub.key is None or sub.key == key:
                    self._offer(sub, record)

    def _offer(self, sub: Subscriber, record: Record) -> None:
        if sub.dropped:
            return
        if sub.queue.qsize() >= QUEUE_SIZE - 1:
            sub.dropped = True
            sub.queue.put_nowait(LAGGING)
            return
        sub.queue.put_nowait(record)
