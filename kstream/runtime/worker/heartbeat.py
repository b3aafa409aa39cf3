"""A worker's heartbeat, kept going by a thread of its own while the worker is busy.

The coordinator declares a worker dead when it has heard nothing from it for
the liveness timeout. A worker sends its heartbeat from its main loop, between
batches; a batch that takes longer than the timeout (a slow user function, a
`flat_map` that expands one record into millions, a restore of a large state)
used to make a live worker "dead": the job rolled back, the new worker met the
same batch and took as long again, and the job retried it forever.

So the main loop *publishes* each heartbeat (`Heartbeat.publish`: it alone
reads its subtasks' counters, which only it changes), and a daemon thread
repeats the latest one with a fresh time whenever none went out for the
period. What the coordinator learns from a heartbeat is that the process is
scheduled and its control producer works; a stopped process (SIGSTOP, a
zombie to fence) stops every thread, so it still falls silent and is fenced.
What a heartbeat cannot tell is whether the worker makes progress: a worker
stuck for good inside a batch is noticed by its checkpoints timing out (the
coordinator aborts them and, after `CoordinatorConfig.tolerable_timeouts` in a
row, rolls the job back and has the worker replaced), not by its liveness. The
heartbeats this thread sends carry what the worker's watchdog found stuck
(`kstream.runtime.worker.stuck`): a call of the job's code that does not return.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from kstream.protocol.messages import WorkerAlive

__all__ = ["Heartbeat"]

log = logging.getLogger("kstream.worker")


class Heartbeat:
    """Sends `WorkerAlive` at least every `period` seconds while the process runs.

    `send(message, flush)` appends to the control topic (thread-safe: a
    librdkafka producer); `generation()` is the worker's current generation;
    `restoring()` whether its subtasks are still being restored in it (the
    coordinator waits for every worker's restore before the generation's first
    checkpoint); `alive()` is checked before each send from the thread and may
    end the process (an orphaned worker kills itself there); `waiting()` whether
    it waits for a new generation instead of joining `generation()`
    (`WorkerAlive.waiting`); `stuck()` gives the
    line and identity of a call of the job's code that does not return
    (`kstream.runtime.worker.stuck`; ("", "") for none), sent with the repeated heartbeats:
    the main loop, when it sends its own, is not stuck; `storing()` the line of a
    snapshot the checkpoint storage is slow to take (`kstream.runtime.checkpoint.storing`).
    """

    def __init__(
        self,
        period: float,
        send: Callable[[WorkerAlive, bool], None],
        generation: Callable[[], int],
        alive: Callable[[], None],
        restoring: Callable[[], bool] = lambda: False,
        stuck: Callable[[], tuple[str, str]] = lambda: ("", ""),
        waiting: Callable[[], bool] = lambda: False,
        storing: Callable[[], str] = lambda: "",
    ) -> None:
        self.period = period
        self._send = send
        self._generation = generation
        self._alive = alive
        self._restoring = restoring
        self._stuck = stuck
        self._waiting = waiting
        self._storing = storing
        # One lock orders every send: a repeated heartbeat never goes out after
        # a newer one the main loop published (counters would seem to go back).
        self._lock = threading.Lock()
        self._latest: WorkerAlive | None = None
        self._last = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def due(self, now: float) -> bool:
        """True if no heartbeat went out for `period` seconds (monotonic `now`)."""
        return now - self._last >= self.period

    def publish(self, message: WorkerAlive, *, flush: bool = False) -> None:
        """Send `message` now and make it the one the thread repeats."""
        with self._lock:
            self._latest = message
            self._last = time.monotonic()
            self._send(message, flush)

    def start(self, first: WorkerAlive) -> None:
        """Start repeating the latest heartbeat (at first `first`, not sent now) from a thread.

        Idempotent. `first` keeps a worker that is still joining (restoring a
        large state before its main loop's first heartbeat) alive.
        """
        with self._lock:
            if self._latest is None:
                self._latest = first
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread; returns once it has ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def repeat(self) -> bool:
        """Repeat the latest heartbeat if one is due; True if one was sent."""
        with self._lock:
            latest = self._latest
            if latest is None or not self.due(time.monotonic()):
                return False
            self._alive()
            stuck, stuck_on = self._stuck()
            message = dataclasses.replace(
                latest,
                generation=self._generation(),
                restoring=self._restoring(),
                waiting=self._waiting(),
                time=time.time(),
                stuck=stuck,
                stuck_on=stuck_on,
                storing=self._storing(),
                woke=0,  # a wake-up goes out once, with the loop's own heartbeat
            )
            self._last = time.monotonic()
            self._send(message, False)
            return True

    def _run(self) -> None:
        # Checks twice a period, so a heartbeat is never more than 1.5 periods apart.
        while not self._stop.wait(self.period / 2):
            try:
                self.repeat()
            except Exception as exc:  # the main loop's own heartbeats still go out
                log.warning("heartbeat thread: %s", exc)
