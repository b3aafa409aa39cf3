"""Reading a ring's completed checkpoints back: each process's state, each channel's recorded state.

A checkpoint of the ring (`kstream.examples.seed_ring`) is read the way a
restore would use it: p's and q's keyed state from the checkpoint's stored
RocksDB copies, and the channel state from the offset ranges the snapshots
name (`SnapshotMeta.channel_offsets` as each range's start,
`SnapshotMeta.channel_replay` as its windows), read back from the Kafka log.
A record in a range counts only if a window of its generation covers its
offset: the same rule a restore's replay applies.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict

from kstream.dataflow.graph import Node, Stage, children
from kstream.dataflow.plan import Plan, TaskSpec
from kstream.examples.seed_ring import P, Q
from kstream.protocol.barrier import Alignment
from kstream.protocol.cuts import Cut, CutKind
from kstream.runtime.channels.format import (
    BARRIER,
    RECORD,
    BatchFormat,
    barrier_checkpoint,
    decode_header,
)
from kstream.runtime.checkpoint.storage import CheckpointStorage, SnapshotMeta
from kstream.runtime.state.store import KEY_FORMAT
from kstream.testing import ReadRecord, read_all
from kstream.tools.seeds.tables import Element, q_cut_on

__all__ = ["RingLayout", "RingSnapshot", "read_snapshots", "recorded_range"]

Channel = tuple[str, int]


def _named(node: Node, name: str) -> bool:
    return (node.kind == "process" and node.name == name) or any(
        _named(c, name) for c in children(node)
    )


@dataclass(frozen=True, slots=True)
class RingLayout:
    """Which subtasks and channels of a ring's plan are p, q, p→q and q→p."""

    plan: Plan
    head: TaskSpec
    p: TaskSpec
    q: TaskSpec
    p_to_q: Channel
    q_to_p: Channel
    #: The channel from q's own source into q.
    q_own: Channel
    #: The subtasks reading p's and q's sources.
    p_source: TaskSpec
    q_source: TaskSpec
    #: Per channel: whether its records are (key, value) pairs.
    keyed: dict[Channel, bool]

    @classmethod
    def of(cls, plan: Plan) -> RingLayout:
        """The layout of a ring's plan (every stage of parallelism 1)."""
        stages = plan.job.stages
        head = next(s for s in stages if s.iterate is not None)
        p = next(s for s in stages if _named(s.root, P))
        q = next(s for s in stages if _named(s.root, Q))
        keyed: dict[Channel, bool] = {}
        found: dict[str, Channel] = {}
        p_source = next(i.upstream for i in head.inputs if not i.loop)
        q_source = next(i.upstream for i in q.inputs if i.upstream is not p)
        for stage in (head, p, q):
            task = TaskSpec(stage.index, 0, 1)
            for inp, (topic, parts) in zip(stage.inputs, plan.input_channels(task), strict=True):
                channel = (topic, parts[0])
                keyed[channel] = inp.key_fn is not None
                if inp.loop:
                    found["q_to_p"] = channel
                elif stage is q:
                    found["p_to_q" if inp.upstream is p else "q_own"] = channel
        return cls(
            plan,
            _task(head),
            _task(p),
            _task(q),
            found["p_to_q"],
            found["q_to_p"],
            found["q_own"],
            _task(p_source),
            _task(q_source),
            keyed,
        )

    def initiator(self, task: str) -> str:
        """Who started a snapshot whose initiator is subtask `task`
        (`CheckpointRecord.started_by`; empty: the coordinator)."""
        if not task:
            return "coordinator"
        return {self.p_source.id: P, self.q_source.id: Q}.get(task, task)

    def cut_label(self, encoded: str) -> str:
        """How a subtask of the ring joined a snapshot (`Acked.cut_on`), in the
        seed's words: on p's or q's marker, on its own source's barrier, on an
        injection (a source's trigger), or "started" (the initiator)."""
        cut = Cut.parse(encoded)
        if cut is None:
            return "unknown"
        if cut.kind is not CutKind.MARKER:
            return str(cut)
        topic, _, partition = cut.channel.rpartition("[")
        channel = (topic, int(partition.rstrip("]") or 0))
        if channel == self.p_to_q:
            return "p's marker"
        if channel == self.q_to_p:
            return "q's marker"
        if cut.upstream in (self.p_source.id, self.q_source.id):
            return "own source"
        return str(cut)

    def injected(self, cuts: Mapping[str, str]) -> str:
        """The sources a snapshot was injected into (`Acked.cut_on` per subtask)."""
        names = [
            f"{who}'s source"
            for who, task in ((P, self.p_source), (Q, self.q_source))
            if cuts.get(task.id) == Cut(CutKind.INJECTED).encode()
        ]
        return " and ".join(names) or "none"

    def element(self, channel: Channel) -> str:
        """The table row of a channel (its topic and partition for one outside the table)."""
        if channel == self.p_to_q:
            return Element.P_TO_Q
        if channel == self.q_to_p:
            return Element.Q_TO_P
        return f"{channel[0]}[{channel[1]}]"


def _task(stage: Stage) -> TaskSpec:
    return TaskSpec(stage.index, 0, 1)


@dataclass(frozen=True, slots=True)
class RingSnapshot:
    """One completed checkpoint of a ring, read back.

    `p_state`/`q_state`: the process's keyed state, key -> value; `channels`:
    element (`RingLayout.element`) -> the stream records its recorded state
    holds, in channel order (only channels with a non-empty range appear);
    `started_by`: `RingLayout.initiator` of the subtask the control topic names
    as its initiator; `q_cut`: how q joined it (`RingLayout.cut_label` of its
    ack's cut; `q_cut_on`, read from what it recorded, when the acks are not at
    hand), `p_cut` the same for p (its loop head, which receives from p's own
    source and from q), `injected` the sources it was injected into
    (`RingLayout.injected`); `p_source_offset`: where the snapshot resumes
    p's source (below 1: its first record, the token ring's token, is still unread;
    a negative offset is Kafka's "from the beginning").
    """

    checkpoint: int
    p_state: dict[str, Any]
    q_state: dict[str, Any]
    channels: dict[str, list[Any]]
    started_by: str
    p_source_offset: int
    q_cut: str = ""
    p_cut: str = ""
    injected: str = ""


class _Log:
    """The records of channel partitions, each read from Kafka once."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._read: dict[Channel, dict[int, ReadRecord]] = {}

    def records(self, channel: Channel) -> dict[int, ReadRecord]:
        if channel not in self._read:
            topic, partition = channel
            self._read[channel] = {
                r.offset: r
                for r in read_all(
                    self._bootstrap, topic, isolation="read_uncommitted", partitions=[partition]
                )
            }
        return self._read[channel]

    def barrier_time(self, channel: Channel, checkpoint: int) -> int | None:
        """When barrier `checkpoint` was written into `channel` (Kafka timestamp, ms);
        None once purged (records before the oldest retained snapshot's offsets)."""
        for record in self.records(channel).values():
            value = record.value
            if (
                value is not None
                and decode_header(value)[0] == BARRIER
                and barrier_checkpoint(value) == checkpoint
            ):
                return record.timestamp
        return None


def recorded_range(
    records: Mapping[int, ReadRecord],
    fmt: BatchFormat,
    keyed: bool,
    start: int,
    windows: list[list[int]],
) -> list[Any]:
    """The stream records of a recorded range of a channel whose log is `records`
    (offset -> record): from `start` to the last window's end, the data records
    of a generation whose window (``[end, generation]``) covers their offset."""
    end = max(e for e, _ in windows)
    out: list[Any] = []
    for offset in range(start, end):
        record = records.get(offset)
        if record is None or record.value is None:
            continue  # a transaction marker or compacted away: not a stream record
        kind, generation = decode_header(record.value)
        if kind != RECORD or not any(g == generation and offset < e for e, g in windows):
            continue
        items = fmt.decode(record.value, keyed)
        out.extend(item[1] for item in items) if keyed else out.extend(items)
    return out


def _state(
    storage: CheckpointStorage, checkpoint: int, task: TaskSpec, op: str, plan: Plan
) -> dict[str, Any]:
    """Operator `op`'s value state per key in the checkpoint's copy of the task's database."""
    loads = plan.job.state_serde.loads
    prefix = op.encode() + b"\0"
    # Key format 3 puts each key's two-byte key group before the operator's prefix.
    grouped = storage.load(checkpoint, task.id).key_format >= KEY_FORMAT
    skip = 2 if grouped else 0
    with tempfile.TemporaryDirectory(prefix="kstream-seed-") as tmp:
        target = Path(tmp) / "db"
        if not storage.fetch_db(checkpoint, task.id, target):
            return {}
        db = Rdict(str(target), Options(raw_mode=True))
        try:
            out: dict[str, Any] = {}
            # Raw mode: keys and values are bytes. Grouped, the operator's keys lie
            # in every key group's range: the whole (small) database is read.
            for k, v in db.items(from_key=b"" if grouped else prefix):
                if not isinstance(k, bytes) or not k[skip:].startswith(prefix):
                    if grouped:
                        continue
                    break
                if isinstance(v, bytes):
                    out[k[skip + len(prefix) :].decode()] = loads(v)
            return out
        finally:
            db.close()
            shutil.rmtree(target, ignore_errors=True)


def read_snapshots(
    layout: RingLayout,
    storage: CheckpointStorage,
    bootstrap: str,
    checkpoints: Iterable[int],
    alignment: Alignment,
    started_by: Mapping[int, str],
    cuts: Mapping[int, Mapping[str, str]] | None = None,
) -> list[RingSnapshot]:
    """Read `checkpoints` (completed, still stored) of the ring laid out as `layout`,
    whose subtasks snapshotted with `alignment`; `started_by` maps a checkpoint to
    the subtask that started it (`CheckpointRecord.started_by`), `cuts` to how
    each subtask joined it (`CheckpointRecord.cuts`)."""
    log = _Log(bootstrap)
    fmt = BatchFormat(layout.plan.job.channel_serde)
    out = []
    for n in checkpoints:
        metas: dict[str, SnapshotMeta] = {t.id: storage.load(n, t.id) for t in layout.plan.tasks}
        channels: dict[str, list[Any]] = {}
        for meta in metas.values():
            for topic, parts in meta.channel_replay.items():
                for partition, windows in parts.items():
                    channel = (topic, partition)
                    start = meta.channel_offsets[topic][partition]
                    records = recorded_range(
                        log.records(channel),
                        fmt,
                        layout.keyed.get(channel, False),
                        start,
                        windows,
                    )
                    channels.setdefault(layout.element(channel), []).extend(records)
        q_recorded = {
            (t, p) for t, parts in metas[layout.q.id].channel_replay.items() for p in parts
        }
        if alignment is Alignment.ALIGNED:
            own, marker = True, True
        elif q_recorded:
            # The channel q recorded delivered its barrier last.
            own, marker = layout.p_to_q in q_recorded, layout.q_own in q_recorded
        else:
            # Nothing came between the two barriers: the one written first came first
            # (unknown once purged).
            mine, theirs = (log.barrier_time(c, n) for c in (layout.q_own, layout.p_to_q))
            if mine is None or theirs is None:
                own = marker = False
            else:
                own, marker = mine <= theirs, theirs < mine
        q_cut = q_cut_on(own, marker)
        cut = (cuts or {}).get(n, {})
        if layout.q.id in cut and alignment is Alignment.UNALIGNED:
            # What q's ack says it cut on, not inferred.
            q_cut = layout.cut_label(cut[layout.q.id])
        source = metas[layout.p_source.id].source_offsets
        out.append(
            RingSnapshot(
                n,
                _state(storage, n, layout.p, f"s{layout.p.stage}.{P}", layout.plan),
                _state(storage, n, layout.q, f"s{layout.q.stage}.{Q}", layout.plan),
                channels,
                layout.initiator(started_by[n]) if n in started_by else "unknown",
                min(source.get(topic, {}).get(0, 0) for topic in source) if source else 0,
                q_cut,
                layout.cut_label(cut[layout.head.id]) if layout.head.id in cut else "unknown",
                layout.injected(cut),
            )
        )
    return out
