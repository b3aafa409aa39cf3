"""When a subtask's sink epochs began, until they are committed (for metrics).

A transactional sink holds a transaction open per epoch until the checkpoint
that seals it completes: the age of the oldest epoch not committed is how long
output waits to become visible, and how close a transaction is to its timeout.
"""

from __future__ import annotations

__all__ = ["SinkEpochs"]


class SinkEpochs:
    """When each sink epoch of a subtask began, until it is committed.

    Epoch boundaries are the subtask's snapshots: `sealed(n)` pre-commits the
    open epoch (it becomes pending) and opens the next; `committed(n)` ends every
    pending epoch up to checkpoint n. Called by the worker's thread; read by a
    scrape (a dict copied under the GIL).
    """

    def __init__(self, now: float) -> None:
        self._open_since = now
        #: checkpoint -> when its epoch began.
        self._pending: dict[int, float] = {}

    def sealed(self, checkpoint: int, now: float) -> None:
        self._pending[checkpoint] = self._open_since
        self._open_since = now

    def committed(self, checkpoint: int) -> None:
        for n in [n for n in self._pending if n <= checkpoint]:
            del self._pending[n]

    def pending(self) -> int:
        return len(self._pending)

    def oldest_age(self, now: float) -> float:
        """Seconds since the oldest epoch not committed began (the open one at least)."""
        return now - min([*dict(self._pending).values(), self._open_since])
