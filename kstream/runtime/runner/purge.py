"""Purging internal topics: deleting records no restart reads again.

The records before the retained checkpoints' channel positions are never read
again (`kstream.protocol.retention.purge_points`) and are deleted
(``delete_records``), at most once per `PURGE_PERIOD_S`. The same
positions name, per commit-marker partition, a marker known to be committed
(records before it are never the newest committed marker again), and the
runner names the control topic's first offset a restart reads
(`kstream.protocol.retention`); both are purged in the same round
(:ref:`internal-topics-bounded`).

A round runs on a thread of its own, with one admin client kept for the job:
the runner coordinates checkpoints on its main loop, and a ``delete_records``
that takes a while (one profiled run saw 1.5 s per round) must not hold back
triggers and completions. A round is skipped while the previous one runs.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import TopicPartition

from kstream.infra.admin import Admin
from kstream.protocol.retention import Positions, purge_points

__all__ = ["CONTROL_HISTORY", "PURGE_PERIOD_S", "ChannelPurger"]

log = logging.getLogger("kstream.runner")

#: Channel purges are batched: at most one round of delete_records per period.
PURGE_PERIOD_S = 5.0

#: Control messages kept before the first one a restart needs, for people
#: (`kstream checkpoints`, benchmarks' figures): about an hour of a small job.
CONTROL_HISTORY = 10_000


class ChannelPurger:
    """The channel positions of the retained checkpoints of a job on `bootstrap`."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._positions: dict[int, Positions] = {}
        self._last = 0.0
        #: (control topic, first offset to keep), if one was named.
        self._control: tuple[str, int] | None = None
        #: The admin client of the rounds (made by the first), and the round running.
        self._admin: Admin | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="purge")
        self._round: Future[None] | None = None

    def completed(self, checkpoint: int, positions: Positions) -> None:
        """Checkpoint `checkpoint` completed with channels consumed up to `positions`."""
        self._positions[checkpoint] = positions

    def control(self, topic: str, keep_from: int) -> None:
        """Records of the control topic `topic` before `keep_from` are no restart's business."""
        self._control = (topic, keep_from)

    def discarded(self, checkpoint: int) -> None:
        """Checkpoint `checkpoint` is no longer retained."""
        self._positions.pop(checkpoint, None)

    def maybe_purge(self, now: float) -> None:
        """Start a round on the purge thread if `PURGE_PERIOD_S` passed since the
        last one started (monotonic `now`) and it is done; returns at once."""
        if now - self._last > PURGE_PERIOD_S and (self._round is None or self._round.done()):
            self._last = now
            # The offsets are taken here, on the caller's thread, which updates them.
            tps = self._due()
            if tps:
                self._round = self._pool.submit(self._delete, tps)

    def purge(self) -> None:
        """Delete records before the oldest retained checkpoint's positions and the
        control topic's first needed offset; returns when done (after a round
        already running).

        A failure is logged and retried next round: records kept too long only cost disk.
        """
        if self._round is not None:
            self._round.result()
        tps = self._due()
        if tps:
            self._pool.submit(self._delete, tps).result()

    def close(self) -> None:
        """Wait for a round still running (bounded by the admin timeout), then stop."""
        self._pool.shutdown(wait=True)

    def _due(self) -> list[TopicPartition]:
        """What a round now deletes before: partitions with the offset to purge up to."""
        points = purge_points(list(self._positions.values()))
        tps = [TopicPartition(t, p, o) for t, parts in points.items() for p, o in parts.items()]
        if self._control is not None and self._control[1] > 0:
            tps.append(TopicPartition(self._control[0], 0, self._control[1]))
        return tps

    def _delete(self, tps: list[TopicPartition]) -> None:
        try:
            if self._admin is None:
                self._admin = Admin(self.bootstrap)
            self._admin.delete_records_before(tps)
        except Exception as exc:
            # A new client next round: this one may be what failed.
            self._admin = None
            log.warning("purge failed (will retry): %s", exc)
