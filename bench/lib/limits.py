"""Time limits that stop work without raising inside it.

An exception raised from a signal handler lands wherever the main thread happens to be (an import, an
allocator, a library call) and can leave that half done. A benchmark's budget is checked between
batches by the loop that runs them; a single step that may run for hours either runs in a forked
child that is killed (``in_child``), or is cancelled by a library that supports it (``Watchdog``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing import Pipe
from typing import Any


class Silent(Exception):
    """A child sent nothing for longer than allowed and was killed."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"nothing from the child for {seconds:.1f} s")
        self.seconds = seconds


def in_child(
    work: Callable[[Callable[[Any], None]], None], quiet_for: float, first_within: float | None = None
) -> Iterator[Any]:
    """Run ``work(send)`` in a forked child and yield every object it sends (pickled over a pipe).

    The child is killed and ``Silent`` raised once it has sent nothing for ``quiet_for`` seconds, so
    one step that would run for hours costs ``quiet_for``; ``first_within`` (default ``quiet_for``)
    bounds the wait for the first object, for a child that prepares before it reports. The child works
    on a copy-on-write image of this process, so nothing it changes is seen here; an exception in it is
    raised here as a RuntimeError with the child's traceback. Only this thread exists in the child: it
    must not use a library whose threads it needs (a DuckDB connection, a Kafka client)."""
    sys.stdout.flush()
    sys.stderr.flush()
    reader, writer = Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's stack
        code = 0
        try:
            reader.close()
            work(writer.send)
            writer.send(_Done())
        except BaseException:
            code = 1
            with contextlib.suppress(BaseException):
                writer.send(_Failed(traceback.format_exc()))
        finally:
            os._exit(code)
    writer.close()
    wait = quiet_for if first_within is None else first_within
    try:
        while True:
            if not reader.poll(wait):
                raise Silent(wait)
            wait = quiet_for
            try:
                msg = reader.recv()
            except EOFError:
                raise RuntimeError("the child exited without a word") from None
            if isinstance(msg, _Done):
                return
            if isinstance(msg, _Failed):
                raise RuntimeError(f"in the child:\n{msg.text}")
            yield msg
    finally:
        reader.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


class _Done:
    pass


class _Failed:
    def __init__(self, text: str) -> None:
        self.text = text


class Watchdog:
    """One thread that calls a cancel function once an armed limit has passed, for a library that
    cancels cooperatively (a DuckDB connection's ``interrupt``). Arming and disarming take a lock and
    write two attributes, no thread start or hand-off, so a limit can guard every timed batch: the
    thread wakes every ``poll`` seconds and stops the work within that of its limit."""

    def __init__(self, poll: float = 0.05) -> None:
        self.poll = poll
        self._lock = threading.Lock()
        self._at: float | None = None
        self._cancel: Callable[[], None] | None = None
        self._fired = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def limit(self, seconds: float, cancel: Callable[[], None]) -> Iterator[Callable[[], bool]]:
        """Within the block, ``cancel()`` is called once it has run ``seconds``, and again every
        ``poll`` until the block ends; yields ``fired()``, which the block checks afterwards whatever
        the library did with the cancellation."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="bench-watchdog", daemon=True)
            self._thread.start()
        with self._lock:
            self._at, self._cancel, self._fired = time.monotonic() + seconds, cancel, False
        try:
            yield lambda: self._fired
        finally:
            with self._lock:
                self._at = self._cancel = None

    def close(self) -> None:
        """Stop the thread (a watchdog that lives as long as its process needs no close)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            with self._lock:  # held while cancelling, so no request outlives the block it was for
                if self._at is not None and self._cancel is not None and time.monotonic() > self._at:
                    self._fired = True
                    self._cancel()  # at every wake-up: a library may drop a request made between calls
