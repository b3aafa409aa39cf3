"""What a run did so far, as the runner counts it: checkpoints, recoveries, restarts.

Read by progress output (`kstream run`), the demo's summary and the testing
kit, which waits for a checkpoint to cover its input through `source_offsets`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kstream.protocol.coordination import Complete
from kstream.protocol.messages import Acked

__all__ = ["Positions", "RunStats"]

#: Consumed positions: topic -> partition -> next offset.
Positions = dict[str, dict[int, int]]


@dataclass
class RunStats:
    """What happened so far, for progress output and the demo's summary."""

    completed: int = 0
    recoveries: int = 0
    restarts: int = 0
    generation: int = 0
    latest: int | None = None
    #: Source offsets (topic -> partition -> next offset) of the latest completed checkpoint.
    source_offsets: Positions = field(default_factory=dict)
    last_alignment_ms: float = 0.0
    last_duration_s: float = 0.0
    max_sync_ms: float = 0.0
    sync_ms: list[float] = field(default_factory=list)
    #: Completed checkpoints that recorded channel state: a subtask snapshotted by
    #: the unaligned rule (`--alignment unaligned`, or an alignment that timed out).
    unaligned: int = 0
    #: Channel records in flight that completed checkpoints recorded as channel state.
    in_flight: int = 0

    def checkpoint_completed(self, c: Complete, acks: Iterable[Acked]) -> Positions:
        """Count checkpoint `c`, acked by `acks` (one per subtask); return its channel
        positions and its committed commit-marker offsets (what may be purged before)."""
        sources: Positions = {}
        channels: Positions = {}
        syncs = []
        unaligned = False
        for a in acks:
            unaligned = unaligned or a.unaligned
            self.in_flight += a.in_flight
            for topic, parts in a.source_offsets.items():
                # Several source stages may read one topic: it is covered only as
                # far as the slowest of them.
                have = sources.setdefault(topic, {})
                for p, offset in parts.items():
                    have[p] = min(offset, have.get(p, offset))
            # Records before these are never read again: purged (`kstream.runtime.runner.purge`).
            for topic, parts in (*a.channel_offsets.items(), *a.marker_offsets.items()):
                channels.setdefault(topic, {}).update(parts)
            syncs.append(a.sync_ms)
        self.completed += 1
        self.unaligned += unaligned
        self.latest = c.checkpoint
        self.source_offsets = sources
        self.last_alignment_ms = c.alignment_ms
        self.last_duration_s = c.duration_s
        if syncs:
            self.sync_ms.append(max(syncs))
            self.max_sync_ms = max(self.max_sync_ms, max(syncs))
        return channels
