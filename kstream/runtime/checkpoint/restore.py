"""Reading a subtask's snapshot before the subtask exists.

`restore` loads what checkpoint n kept of one subtask: its meta, its state
database placed where the subtask opens it, the sinks' kept parts. It refuses,
with a `CheckpointError` naming the checkpoint, a snapshot this subtask cannot
resume from: one whose state was written with another serde, whose state
database is lost or damaged, or that replays a channel the subtask does not read.
The worker reports that error to the coordinator, which falls back to an older
checkpoint.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kstream.dataflow.outputs import SinkSnapshot
from kstream.dataflow.state.serde import StateSerde
from kstream.errors import CheckpointError
from kstream.protocol.barrier import Channel, Replay
from kstream.runtime.checkpoint.storage import CheckpointStorage, SnapshotMeta, check_state_serde
from kstream.runtime.state.store import KEY_FORMAT, StateStore

__all__ = ["Restored", "restore"]


@dataclass(frozen=True)
class Restored:
    """Where a subtask starts: checkpoint `checkpoint` (None: from scratch)."""

    checkpoint: int | None
    #: The snapshot's meta (None: from scratch).
    meta: SnapshotMeta | None = None
    #: The subtask's keyed state, open (None: its stage keeps none).
    state: StateStore | None = None
    #: What the snapshot kept of each sink, by sink name (`SinkWriter.recover`).
    sinks: Mapping[str, SinkSnapshot] = field(default_factory=dict)

    @property
    def epoch(self) -> int:
        """The sinks' first epoch: the one after the checkpoint."""
        return (self.checkpoint or 0) + 1

    @property
    def key_format(self) -> int:
        """Encoding of keys in state and routing: a resumed job keeps its checkpoint's
        (its state and its routing were written with it; `kstream.runtime.state.store`)."""
        return KEY_FORMAT if self.meta is None else self.meta.key_format

    def kept(self, sink: str) -> SinkSnapshot | None:
        """What the snapshot kept of sink `sink` (None: from scratch; empty: nothing kept)."""
        if self.meta is None:
            return None
        return self.sinks.get(sink, SinkSnapshot(self.meta.sink.get(sink, {}), None))

    def replay(
        self, channels: Mapping[tuple[str, int], Channel]
    ) -> dict[Channel, tuple[Replay, ...]]:
        """The replay windows of the recorded channel state, per channel of `channels`
        (every channel the snapshot replays is one: `restore` refused others)."""
        if self.meta is None:
            return {}
        return {
            channels[topic, p]: tuple(Replay(end, gen) for end, gen in windows)
            for topic, recorded in self.meta.channel_replay.items()
            for p, windows in recorded.items()
        }


def restore(
    storage: CheckpointStorage,
    checkpoint: int | None,
    task: str,
    *,
    state_db: Path | None,
    state_serde: StateSerde,
    inputs: Collection[tuple[str, int]] | None = None,
) -> Restored:
    """Read subtask `task`'s snapshot of `checkpoint` (None: start from scratch).

    `state_db`: where the subtask's state database lives (None: its stage keeps
    no state); restored from the snapshot there, or wiped when starting from
    scratch, then opened. `inputs`: the channels the subtask reads, (topic,
    partition); a snapshot that replays another is refused (None: a source,
    which reads none, is not checked).

    Raises `CheckpointError` when the snapshot cannot be resumed from; a failure
    of RocksDB opening a damaged copy is reported as one, naming the checkpoint.
    """
    meta: SnapshotMeta | None = None
    state: StateStore | None = None
    try:
        if checkpoint is not None:
            meta = storage.load(checkpoint, task)
            check_state_serde(meta, state_serde.name)
            if inputs is not None:
                _check_replay(meta, checkpoint, task, inputs)
        if state_db is not None:
            if checkpoint is not None:
                found = storage.fetch_db(checkpoint, task, state_db)
                if not found and meta is not None and meta.has_state:
                    # An empty database here would silently reset every key's state.
                    raise CheckpointError(
                        f"checkpoint {checkpoint} lost the state database of {task}"
                    )
            else:
                StateStore.wipe(state_db)
            state = StateStore(state_db, state_serde)
    except CheckpointError:
        raise
    except Exception as exc:
        if checkpoint is None:
            raise
        # RocksDB reports a damaged copy as a bare exception: name the checkpoint.
        raise CheckpointError(
            f"{task} cannot be restored from checkpoint {checkpoint}: {type(exc).__name__}: {exc}"
        ) from exc
    if meta is None or checkpoint is None:
        return Restored(checkpoint, state=state)
    sinks = {
        name: SinkSnapshot(kept, storage.load_payload(checkpoint, task, name))
        for name, kept in meta.sink.items()
    }
    return Restored(checkpoint, meta, state, sinks)


def _check_replay(
    meta: SnapshotMeta, checkpoint: int, task: str, inputs: Collection[tuple[str, int]]
) -> None:
    """Refuse a snapshot recording the state of a channel `task` does not read."""
    for topic, recorded in meta.channel_replay.items():
        for p in recorded:
            if (topic, p) not in inputs:
                raise CheckpointError(
                    f"checkpoint {checkpoint} of {task} replays {topic}[{p}], "
                    "which is not one of its inputs"
                )
