"""What a worker's snapshot thread is writing to checkpoint storage, and since when.

A checkpoint whose snapshots cannot be written in time (an object store that
hangs: connections accepted, nothing answered) times out like one held up by a
stuck subtask, and after `CoordinatorConfig.tolerable_timeouts` in a row the
coordinator would roll the job back and replace its workers. That cannot help
when the storage is to blame: the restore reads from the same storage, and the
workers were processing all along. So the worker's heartbeat says when one of
its snapshots has waited for the storage for `SLOW_STORE_S` or more, counted from
when it was handed to the executor (`WorkerAlive.storing`): a store that hangs
holds up the ones queued behind it, and once it returns they are written one
after another, each quickly, while the checkpoints they belong to time out. The
coordinator keeps such workers out of a rollback for timeouts
(`kstream.protocol.coordinator`): checkpoints abort, processing goes on, and the
next checkpoint tries the storage again.
"""

from __future__ import annotations

import itertools
import threading
import time

__all__ = ["SLOW_STORE_S", "Storing"]

#: A snapshot waiting this long for the storage is reported. Short: the report only
#: excuses checkpoints that time out, and the shortest timeouts are a few seconds.
SLOW_STORE_S = 1.0


class Storing:
    """The snapshots a worker handed to its executor to store and not yet stored, and
    since when. Written by the worker's threads, read by the heartbeat's: thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        #: Queued or being stored: id -> (checkpoint, subtask, handed over at).
        self._pending: dict[int, tuple[int, str, float]] = {}

    def queued(self, checkpoint: int, task: str) -> int:
        """Note the snapshot of `task` for `checkpoint` handed over now; its id for `done`."""
        with self._lock:
            n = next(self._ids)
            self._pending[n] = (checkpoint, task, time.monotonic())
            return n

    def done(self, n: int) -> None:
        """The snapshot `queued` gave `n` is stored, or failed: it waits no more."""
        with self._lock:
            self._pending.pop(n, None)

    def slow(self, now: float | None = None) -> str:
        """One line naming the snapshot that has waited longest, if that is `SLOW_STORE_S`
        or more ("" if none)."""
        with self._lock:
            oldest = min(self._pending.values(), key=lambda p: p[2], default=None)
        if oldest is None:
            return ""
        checkpoint, task, since = oldest
        took = (time.monotonic() if now is None else now) - since
        if took < SLOW_STORE_S:
            return ""
        return f"storing {task}'s snapshot of checkpoint {checkpoint} for {took:.0f}s"
