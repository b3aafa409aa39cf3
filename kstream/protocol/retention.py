"""What a job's internal topics retain: the records a restart may read again.

Two pure decisions (:ref:`internal-topics-bounded`): `purge_points`, where each
channel partition may be purged up to (the retained checkpoints' positions),
and `ControlRetention`, which prefix of the control topic no restart reads.

**Channels.** A completed checkpoint records where each channel partition was
consumed up to; a restore replays channels from the positions of the
checkpoint it restores, and only retained checkpoints are restored. So the
records before the earliest position of any retained checkpoint are never read
again.

**The control topic.**

The control topic is the durable record of a job's checkpoints, but a restart
reads only a little of it (`kstream.protocol.coordinator.replay`: the retained
completions, the identity recorded with the newest, the largest generation and
checkpoint id; `kstream.protocol.presence`: the last announcement; a joining
worker, `kstream.protocol.recovery`: the latest ``recover`` and what follows).
`ControlRetention` follows the messages in topic order, with their offsets, and
names the first offset that must be kept so that reading from there gives each
of them what the whole topic gives. Pure: the runner feeds it and purges.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from kstream.errors import ConfigurationError
from kstream.protocol.messages import (
    Completed,
    ControlMessage,
    Presence,
    Recovered,
    checkpoint_of,
    generation_of,
)

__all__ = ["ControlRetention", "Positions", "purge_points", "restatement"]

#: Channel positions of one checkpoint: topic -> partition -> next offset.
Positions = dict[str, dict[int, int]]


def purge_points(retained: Sequence[Positions]) -> Positions:
    """Per channel partition, the offset records before which no restore reads: the
    earliest position any of the `retained` checkpoints names.

    With concurrent snapshots a smaller id may stand later on a channel than a
    larger one (in id order the oldest's are the earliest anyway), so the minimum
    is taken over all. A partition some retained checkpoint does not name is
    kept whole (absent from the result), and so is one whose point is 0.
    """
    if not retained:
        return {}
    first, rest = retained[0], retained[1:]
    points: Positions = {}
    for topic, parts in first.items():
        for p, o in parts.items():
            at = min([o] + [r.get(topic, {}).get(p, -1) for r in rest])
            if at > 0:
                points.setdefault(topic, {})[p] = at
    return points


def restatement(recover: Recovered) -> Recovered:
    """A copy of `recover` that workers join as they would the original.

    Never `fresh`: a fresh start forgets the completions before it, and the
    copy comes after completions of its own generation.
    """
    return Recovered(
        recover.generation,
        recover.checkpoint,
        recover.reason,
        recover.time,
        restated=True,
        kept=recover.kept,
    )


@dataclass(slots=True)
class ControlRetention:
    """The first offset to keep of a control topic seen so far (`keep_from`).

    Feed every message read, in topic order, to `saw`; messages not fed (read
    by nobody here) are assumed to matter to no restart, so feed from the
    topic's start or from a point where nothing before is needed.
    """

    #: Completed checkpoints the coordinator retains (`CoordinatorConfig.retained`).
    retained: int
    #: The completions `replay` keeps, as (checkpoint, offset): the `retained`
    #: largest ids (a min-heap). Ids, not topic order: `replay` keeps the largest,
    #: and a topic written by an older or foreign writer may hold them out of order.
    _completions: list[tuple[int, int]] = field(default_factory=list, init=False)
    #: The offset of the last completion: `replay` takes the identity from it.
    _last_completion: int | None = field(default=None, init=False)
    #: The latest ``recover`` (what a joining worker restores from) and its offset.
    recovered: Recovered | None = field(default=None, init=False)
    recovered_at: int | None = field(default=None, init=False)
    _presence: int | None = field(default=None, init=False)
    #: The largest generation and checkpoint id seen, and where each was last seen.
    _generation: tuple[int, int] | None = field(default=None, init=False)
    _checkpoint: tuple[int, int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.retained < 1:
            raise ConfigurationError(f"retained checkpoints must be >= 1, got {self.retained}")

    def saw(self, offset: int, message: ControlMessage) -> None:
        """`message` is at `offset` (offsets increase from call to call)."""
        g = generation_of(message)
        if g is not None and (self._generation is None or g >= self._generation[0]):
            self._generation = (g, offset)
        n = checkpoint_of(message)
        if n is not None and (self._checkpoint is None or n >= self._checkpoint[0]):
            self._checkpoint = (n, offset)
        match message:
            case Completed():
                self._last_completion = offset
                entry = (message.checkpoint, offset)
                if len(self._completions) < self.retained:
                    heapq.heappush(self._completions, entry)
                else:
                    heapq.heappushpop(self._completions, entry)
            case Recovered():
                self.recovered, self.recovered_at = message, offset
                if message.fresh:
                    # `replay` forgets every completion before a fresh start.
                    self._completions.clear()
                    self._last_completion = None
            case Presence():
                self._presence = offset
            case _:
                pass

    def keep_from(self) -> int | None:
        """The first offset a restart may read; None until the job has started (nothing to drop).

        Everything before it can be deleted: `replay`, `last_presence` and a
        worker's join read the same from there as from the topic's start. In a
        generation that lasts, its ``recover`` holds this point back: restate
        it (`restatement`) and the point moves past the original.
        """
        if self.recovered_at is None:
            return None
        keep = [self.recovered_at, *(offset for _, offset in self._completions)]
        if self._last_completion is not None:
            keep.append(self._last_completion)
        for seen in (self._generation, self._checkpoint):
            if seen is not None:
                keep.append(seen[1])
        if self._presence is not None:
            keep.append(self._presence)
        return min(keep)
