"""What a worker's snapshot thread is writing to checkpoint storage, and since when.

A checkpoint whose snapshots cannot be written in time (an object store that
hangs: connections accepted, nothing answered) times out like one held up by a
stuck subtask, and after `CoordinatorConfig.tolerable_timeouts` in a row the
coordinator would roll the job back and replace its workers. That cannot help
when the storage is to blame: the restore reads from the same storage, and the
workers were processing all along. So the worker's heartbeat says when one of
its snapshots has been in the storage's hands for `SLOW_STORE_S` or more
(`WorkerAlive.storing`), and the coordinator keeps such workers out of a
rollback for timeouts (`kstream.protocol.coordinator`): checkpoints abort,
processing goes on, and the next checkpoint tries the storage again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["SLOW_STORE_S", "Storing"]

#: A snapshot in the storage's hands this long is reported. Short: the report only
#: excuses checkpoints that time out, and the shortest timeouts are a few seconds.
SLOW_STORE_S = 1.0


class Storing:
    """The snapshot (checkpoint, subtask) being stored on a worker's executor, and since
    when. Written by the executor's thread, read by the heartbeat's: thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[int, str, float] | None = None

    @contextmanager
    def store(self, checkpoint: int, task: str) -> Iterator[None]:
        """Mark the snapshot of `task` for `checkpoint` as being stored while the block runs."""
        with self._lock:
            self._current = (checkpoint, task, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._current = None

    def slow(self, now: float | None = None) -> str:
        """One line naming the snapshot stored for `SLOW_STORE_S` or more ("" if none)."""
        with self._lock:
            current = self._current
        if current is None:
            return ""
        checkpoint, task, since = current
        took = (time.monotonic() if now is None else now) - since
        if took < SLOW_STORE_S:
            return ""
        return f"storing {task}'s snapshot of checkpoint {checkpoint} for {took:.0f}s"
