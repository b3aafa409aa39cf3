"""Channel purging: deleting channel records no retained checkpoint can replay.

A completed checkpoint records where each channel partition was consumed up
to; a restore replays channels from the positions of the checkpoint it
restores, and only retained checkpoints are restored. So the records before
the oldest retained checkpoint's positions are never read again and are
deleted (``delete_records``), at most once per `PURGE_PERIOD_S`.
"""

from __future__ import annotations

import logging

from confluent_kafka import TopicPartition

from kstream.infra.admin import Admin

__all__ = ["PURGE_PERIOD_S", "ChannelPurger"]

log = logging.getLogger("kstream.runner")

#: Channel purges are batched: at most one round of delete_records per period.
PURGE_PERIOD_S = 5.0

#: Channel positions of one checkpoint: topic -> partition -> next offset.
Positions = dict[str, dict[int, int]]


class ChannelPurger:
    """The channel positions of the retained checkpoints of a job on `bootstrap`."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._positions: dict[int, Positions] = {}
        self._last = 0.0

    def completed(self, checkpoint: int, positions: Positions) -> None:
        """Checkpoint `checkpoint` completed with channels consumed up to `positions`."""
        self._positions[checkpoint] = positions

    def discarded(self, checkpoint: int) -> None:
        """Checkpoint `checkpoint` is no longer retained."""
        self._positions.pop(checkpoint, None)

    def maybe_purge(self, now: float) -> None:
        """Purge if `PURGE_PERIOD_S` passed since the last round (monotonic `now`)."""
        if now - self._last > PURGE_PERIOD_S:
            self._last = now
            self.purge()

    def purge(self) -> None:
        """Delete channel records before the oldest retained checkpoint's positions.

        A failure is logged and retried next round: records kept too long only cost disk.
        """
        if not self._positions:
            return
        oldest = min(self._positions)
        tps = [
            TopicPartition(topic, p, o)
            for topic, parts in self._positions[oldest].items()
            for p, o in parts.items()
            if o > 0
        ]
        try:
            Admin(self.bootstrap).delete_records_before(tps)
        except Exception as exc:
            log.warning("channel purge failed (will retry): %s", exc)
