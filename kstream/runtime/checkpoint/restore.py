"""Reading a subtask's snapshot before the subtask exists.

`restore` loads what checkpoint n kept of one subtask: its meta, its state
database placed where the subtask opens it, the sinks' kept parts. It refuses,
with a `CheckpointError` naming the checkpoint, a snapshot this subtask cannot
resume from: one whose state was written with another serde, whose state
database is lost or damaged, or that replays a channel the subtask does not read.
The worker reports that error to the coordinator, which falls back to an older
checkpoint.

**At another parallelism** (`rescaled`: some stage's snapshots record another
parallelism than the job has now; key format 3 only) a subtask reads what its key groups need
(`kstream.protocol.key_groups.restore_plan`): each overlapping old subtask's
database is fetched into a temporary directory and the entries of the key
groups it now owns are copied into a fresh database. Its meta is merged from
every old snapshot of the stage: source offsets of the partitions it now
reads, no channel offsets (the runner recreated the channel topics at the new
layout), watermarks held back to the minimum of the old ones. The sinks' kept
epochs of old subtask `j` are settled by new subtask ``j % P_new``
(`Restored.inherited`). A snapshot that recorded channel state (unaligned) is
refused: those channels no longer exist. A subtask of a stage whose own
parallelism is unchanged in a rescaled job takes the same path (its channels
are new too, its sinks' commit markers may be numbered otherwise), but
fetches its database whole.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstream.dataflow.outputs import SinkSnapshot
from kstream.dataflow.state.serde import StateSerde
from kstream.errors import CheckpointError
from kstream.protocol.barrier import Channel, Replay
from kstream.protocol.key_groups import restore_plan
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
    #: At another parallelism: the old parallelism of the subtask's stage (0: the same).
    rescaled_from: int = 0
    #: At another parallelism: the old subtasks (by index) whose sinks' kept epochs
    #: this one settles under their names before its own start, and what they kept.
    inherited: tuple[tuple[int, Mapping[str, SinkSnapshot]], ...] = ()

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
        if self.rescaled_from:
            # Its own old epochs (if it existed before) are in `inherited`.
            return SinkSnapshot({}, None)
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
    max_parallelism: int = 0,
    layout: tuple[int, int, tuple[int, ...]] | None = None,
) -> Restored:
    """Read subtask `task`'s snapshot of `checkpoint` (None: start from scratch).

    `state_db`: where the subtask's state database lives (None: its stage keeps
    no state); restored from the snapshot there, or wiped when starting from
    scratch, then opened. `inputs`: the channels the subtask reads, (topic,
    partition); a snapshot that replays another is refused (None: a source,
    which reads none, is not checked). `max_parallelism`: the job's key groups
    (a fresh or key-format-3 state is opened with them). `layout`: the
    subtask's stage and index and the job's parallelism per stage; a checkpoint
    taken at another is then restored by `rescaled` (None: never).

    Raises `CheckpointError` when the snapshot cannot be resumed from; a failure
    of RocksDB opening a damaged copy is reported as one, naming the checkpoint.
    """
    meta: SnapshotMeta | None = None
    state: StateStore | None = None
    if checkpoint is not None and layout is not None:
        stage, index, parallelism = layout
        # Each stage's subtask 0 records the stage's parallelism (0: before key groups).
        old = tuple(_recorded(storage, checkpoint, k, p) for k, p in enumerate(parallelism))
        if old != parallelism:
            return rescaled(
                storage,
                checkpoint,
                (stage, index, parallelism[stage]),
                old[stage],
                state_db=state_db,
                state_serde=state_serde,
                max_parallelism=max_parallelism,
                inputs=inputs,
            )
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
            grouped = meta is None or meta.key_format == KEY_FORMAT
            state = StateStore(state_db, state_serde, max_parallelism if grouped else 0)
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


def _load(storage: CheckpointStorage, checkpoint: int, task: str) -> SnapshotMeta:
    """`storage.load`, with any failure but a `CheckpointError` named as one."""
    try:
        return storage.load(checkpoint, task)
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(
            f"{task} of checkpoint {checkpoint} is unreadable: {type(exc).__name__}: {exc}"
        ) from exc


def _recorded(storage: CheckpointStorage, checkpoint: int, stage: int, now: int) -> int:
    """The parallelism of stage `stage` when checkpoint `checkpoint` was taken: what its
    subtask 0 recorded; `now` if it records none (before key groups) or cannot be read
    (the subtasks that read it report that)."""
    try:
        return storage.load(checkpoint, f"s{stage}-0").parallelism or now
    except Exception:
        return now


def rescaled(
    storage: CheckpointStorage,
    checkpoint: int,
    layout: tuple[int, int, int],
    old: int,
    *,
    state_db: Path | None,
    state_serde: StateSerde,
    max_parallelism: int,
    inputs: Collection[tuple[str, int]] | None,
) -> Restored:
    """Restore subtask `layout` = (stage, index, parallelism) from checkpoint
    `checkpoint`, whose snapshots of the stage were taken at parallelism `old`
    (see the module docstring).

    Raises `CheckpointError` with one line when the snapshots cannot be
    rescaled: no key groups (key format 1 or 2), another max parallelism,
    recorded channel state, or a lost or damaged database.
    """
    stage, index, new = layout
    task = f"s{stage}-{index}"
    metas = [_load(storage, checkpoint, f"s{stage}-{j}") for j in range(old)]
    for m in metas:
        check_state_serde(m, state_serde.name)
        if m.key_format != KEY_FORMAT or not m.max_parallelism:
            raise CheckpointError(
                f"checkpoint {checkpoint} of {m.task} has no key groups (key format "
                f"{m.key_format}) and cannot be restored at parallelism {new} (it was {old}): "
                "run with its parallelism, or start the job fresh"
            )
        if m.max_parallelism != max_parallelism:
            raise CheckpointError(
                f"checkpoint {checkpoint} of {m.task} has {m.max_parallelism} key groups, "
                f"the job {max_parallelism}: another max parallelism is another job"
            )
        if m.channel_replay:
            raise CheckpointError(
                f"checkpoint {checkpoint} of {m.task} recorded channel state (unaligned) and "
                "cannot be rescaled: resume it at its parallelism, or rescale from an "
                "aligned checkpoint"
            )
    state: StateStore | None = None
    if state_db is not None:
        if old == new:
            # Its own stage keeps its layout: its database whole, as always.
            StateStore.wipe(state_db)
            if not storage.fetch_db(checkpoint, task, state_db) and metas[index].has_state:
                raise CheckpointError(f"checkpoint {checkpoint} lost the state database of {task}")
        else:
            StateStore.wipe(state_db)
        state = StateStore(state_db, state_serde, max_parallelism)
        try:
            for j, groups in restore_plan(max_parallelism, old, new)[index] if old != new else ():
                _copy(storage, checkpoint, metas[j], groups, state, state_db.parent)
        except CheckpointError:
            state.close()
            raise
        except Exception as exc:
            state.close()
            raise CheckpointError(
                f"{task} cannot be restored from checkpoint {checkpoint} at parallelism {new}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    meta = SnapshotMeta(
        checkpoint=checkpoint,
        generation=max(m.generation for m in metas),
        task=task,
        source_offsets=_source_offsets(metas, index, new),
        has_state=any(m.has_state for m in metas),
        identity=metas[0].identity,
        state_serde=metas[0].state_serde,
        watermarks=_watermarks(metas, index, new, 0 if inputs is None else len(inputs)),
        key_format=KEY_FORMAT,
        max_parallelism=max_parallelism,
        parallelism=old,
    )
    inherited = tuple(
        (
            j,
            {
                name: SinkSnapshot(kept, storage.load_payload(checkpoint, metas[j].task, name))
                for name, kept in metas[j].sink.items()
            },
        )
        for j in range(index, old, new)
    )
    return Restored(checkpoint, meta, state, rescaled_from=old, inherited=inherited)


def _copy(
    storage: CheckpointStorage,
    checkpoint: int,
    meta: SnapshotMeta,
    groups: range,
    state: StateStore,
    scratch: Path,
) -> None:
    """Copy key groups `groups` of `meta`'s snapshot database into `state`."""
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rescale-", dir=scratch) as tmp:
        db = Path(tmp) / "db"
        if not storage.fetch_db(checkpoint, meta.task, db):
            if meta.has_state:
                raise CheckpointError(
                    f"checkpoint {checkpoint} lost the state database of {meta.task}"
                )
            return
        state.copy_groups(db, groups)


def _source_offsets(metas: list[SnapshotMeta], index: int, new: int) -> dict[str, dict[int, int]]:
    """The offsets of the partitions subtask `index` of `new` reads (``p % new == index``),
    from whichever old snapshot had them."""
    out: dict[str, dict[int, int]] = {}
    for m in metas:
        for topic, parts in m.source_offsets.items():
            mine = {p: o for p, o in parts.items() if p % new == index}
            out.setdefault(topic, {}).update(mine)
    return out


def _watermarks(metas: list[SnapshotMeta], index: int, new: int, channels: int) -> dict[str, Any]:
    """The old subtasks' watermarks merged: a watermark may be held back, never moved on.

    A source's per-partition maxima and idleness are those of the partitions it
    now reads, and its watermark the minimum; a channel subtask's channels are
    new, and each starts at the minimum of the old input watermarks.
    """
    sources = [m.watermarks["source"] for m in metas if "source" in m.watermarks]
    inputs = [m.watermarks["input"] for m in metas if "input" in m.watermarks]
    if sources:
        tops: dict[Any, Any] = {}
        idle: set[Any] = set()
        for w in sources:
            tops.update({p: t for p, t in dict(w["max"]).items() if int(p) % new == index})
            idle |= {p for p in w["idle"] if int(p) % new == index}
        low = min(w["watermark"] for w in sources)
        return {"source": {"max": tops, "idle": sorted(idle), "watermark": low}}
    if inputs:
        low = min(w["watermark"] for w in inputs)
        return {"input": {"channels": [low] * channels, "idle": [], "watermark": low}}
    return {}
