"""Unaligned snapshots held until their channel state is recorded.

An unaligned snapshot is taken at the first barrier of its checkpoint; the
records of the other channels up to their barriers are its channel state,
recorded as offset ranges while processing goes on. It must not be stored
(and acked) before that state is complete: `complete` then gives it back,
its meta carrying the ranges. An alignment abandoned never completes: `drop`
forgets it and deletes its staged state.
"""

from __future__ import annotations

import dataclasses
import shutil
from concurrent.futures import Executor

from kstream.runtime.checkpoint.take import Taken

__all__ = ["HeldSnapshots"]


class HeldSnapshots:
    """A subtask's snapshots taken but waiting for their channel state, by checkpoint."""

    def __init__(self, executor: Executor) -> None:
        #: The executor the snapshots' state checkpoints were submitted to.
        self._executor = executor
        self._held: dict[int, Taken] = {}

    def __contains__(self, checkpoint: object) -> bool:
        return checkpoint in self._held

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, taken: Taken) -> None:
        """Keep `taken` until its channel state is complete (or dropped)."""
        self._held[taken.meta.checkpoint] = taken

    def complete(
        self,
        checkpoint: int,
        channel_offsets: dict[str, dict[int, int]],
        channel_replay: dict[str, dict[int, list[list[int]]]],
        alignment_ms: float,
    ) -> Taken:
        """The channel state of `checkpoint` is recorded: the snapshot to store, its
        meta now with the channels' offsets, replay windows and alignment time.

        Raises `KeyError` if `checkpoint` is not held.
        """
        taken = self._held.pop(checkpoint)
        meta = dataclasses.replace(
            taken.meta,
            channel_offsets=channel_offsets,
            channel_replay=channel_replay,
            alignment_ms=alignment_ms,
        )
        return dataclasses.replace(taken, meta=meta)

    def drop(self, checkpoint: int) -> None:
        """`checkpoint` will never be complete: forget it (it is never stored or acked)."""
        taken = self._held.pop(checkpoint, None)
        if taken is not None and taken.staged is not None:
            # On the executor, after the checkpoint being created there (first in, first out).
            self._executor.submit(shutil.rmtree, taken.staged, ignore_errors=True)
