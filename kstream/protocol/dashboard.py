"""What the web dashboard shows, from a job's control topic (pure, no I/O).

`dashboard_view(job, messages, now, identity)` turns the control messages read
so far (topic order) into a frozen `DashboardView`; `DashboardView.to_json` is
the document the page renders (``/api/view``, `kstream.tools.ui`). It builds
on `kstream.protocol.status.job_status` (workers, subtasks, rates, recoveries)
and `kstream.protocol.checkpoint_history` (what became of each checkpoint) and
adds:

* the job graph: stages with their parallelism, sources and operators, the
  channels between them (keyed or round-robin) and the loops (an edge into a
  stage from itself or a later one), from the latest completion's
  `JobIdentity` or the one given (the runner's); without either, the stages
  and parallelism the subtasks' names reveal, and no channels;
* the newest `HISTORY` checkpoints with, for each, its slowest subtask (the
  latest to ack, see `kstream.protocol.status` for an ack's time);
* each checkpoint in flight with every subtask's part: acked (with the cut
  offsets of its input channels and, unaligned, the records in flight it
  recorded), declined, or pending: aligning (with the channels whose barrier
  arrived) or recording channel state (with the channels being recorded), as
  its worker's latest heartbeat reports it (`SubtaskAlignment`);
* per subtask, its latest unaligned snapshot that recorded channel state
  (records in flight), with where it cut each input channel;
* each subtask's state: ``running``, ``aligning`` (pending in a checkpoint in
  flight), ``recording channel state`` (pending, and its heartbeat says it
  records) or ``restoring`` (its worker restores and it has not acked in the
  current generation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.identity import JobIdentity
from kstream.protocol.messages import Acked, Completed, ControlMessage, Declined
from kstream.protocol.status import JobStatus, job_status
from kstream.protocol.worker_alive import SubtaskAlignment, WorkerAlive

__all__ = [
    "HISTORY",
    "CheckpointRow",
    "DashboardView",
    "EdgeView",
    "GraphView",
    "InFlight",
    "Recorded",
    "SlowestAck",
    "StageView",
    "SubtaskPart",
    "dashboard_view",
    "graph_of",
]

#: Checkpoints the history keeps (newest).
HISTORY = 100

_EDGE = re.compile(r"^s(\d+)>s(\d+)\.i(\d+):(keyed|round-robin)(?:/side(\d+))?$")
_TASK = re.compile(r"^s(\d+)-(\d+)$")


@dataclass(frozen=True, slots=True)
class StageView:
    """One stage: `parallelism` subtasks ``s<index>-0`` …"""

    index: int
    parallelism: int
    #: The source it reads ("" none: it reads channels).
    source: str = ""
    #: Its operators' names (``kind:name``), in plan order.
    operators: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EdgeView:
    """A channel from stage `source` into input `input` of stage `target`."""

    source: int
    target: int
    input: int
    kind: str
    #: A feedback edge (from the stage itself or a later one).
    loop: bool


@dataclass(frozen=True, slots=True)
class GraphView:
    stages: tuple[StageView, ...]
    edges: tuple[EdgeView, ...]
    sinks: tuple[str, ...]
    #: ``identity``: the job's recorded identity; ``subtasks``: only what the
    #: subtasks' names reveal (no channels); ``none``: nothing known yet.
    known_from: Literal["identity", "subtasks", "none"]


@dataclass(frozen=True, slots=True)
class SlowestAck:
    """The subtask of a checkpoint that acked last."""

    subtask: str
    #: Seconds from the trigger to about its ack (None: a time unknown).
    after_s: float | None
    alignment_ms: float
    sync_ms: float
    size: int
    unaligned: bool
    in_flight: int


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    checkpoint: int
    generation: int | None
    status: str
    reason: str
    started_by: str
    triggered_at: float | None
    duration_s: float | None
    alignment_ms: float | None
    size: int | None
    acks: int
    slowest: SlowestAck | None


@dataclass(frozen=True, slots=True)
class SubtaskPart:
    """One subtask's part in a checkpoint in flight."""

    subtask: str
    #: ``acked``, ``declined`` or ``pending`` (aligning or recording channel state).
    state: Literal["acked", "declined", "pending"]
    unaligned: bool = False
    in_flight: int = 0
    #: Where its snapshot cut each input channel: ``topic[partition]`` -> offset.
    channels: tuple[tuple[str, int], ...] = ()
    reason: str = ""
    #: Pending, as its worker's latest heartbeat reports: its input channels in
    #: all (0: no report), those that delivered this checkpoint's barrier (offset
    #: after it), and those being recorded for it (offset at the snapshot).
    inputs: int = 0
    arrived: tuple[tuple[str, int], ...] = ()
    recording: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class InFlight:
    checkpoint: int
    generation: int | None
    triggered_at: float | None
    age_s: float | None
    parts: tuple[SubtaskPart, ...]


@dataclass(frozen=True, slots=True)
class Recorded:
    """A subtask's latest unaligned snapshot that recorded channel records."""

    subtask: str
    checkpoint: int
    generation: int
    #: Channel records its snapshot recorded (the offset span of the recorded ranges).
    in_flight: int
    #: Where it cut each input channel: ``topic[partition]`` -> offset.
    channels: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DashboardView:
    """Everything the page shows (see `dashboard_view`)."""

    status: JobStatus
    graph: GraphView
    checkpoints: tuple[CheckpointRow, ...]
    in_flight: tuple[InFlight, ...]
    #: Subtask -> ``running`` / ``aligning`` / ``restoring``.
    subtask_states: tuple[tuple[str, str], ...]
    recorded: tuple[Recorded, ...] = ()

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["status"] = self.status.to_json()
        body["subtask_states"] = dict(self.subtask_states)
        for part in (p for f in body["in_flight"] for p in f["parts"]):
            for key in ("channels", "arrived", "recording"):
                part[key] = dict(part[key])
        for rec in body["recorded"]:
            rec["channels"] = dict(rec["channels"])
        return body


def _task_key(task: str) -> tuple[int, int, str]:
    m = _TASK.match(task)
    return (int(m[1]), int(m[2]), "") if m else (1 << 30, 0, task)


def graph_of(identity: JobIdentity | None, subtasks: Iterable[str] = ()) -> GraphView:
    """The job graph `identity` describes; without one, the stages of `subtasks`' names."""
    if identity is None:
        width: dict[int, int] = {}
        for task in subtasks:
            m = _TASK.match(task)
            if m:
                width[int(m[1])] = max(width.get(int(m[1]), 0), int(m[2]) + 1)
        found = tuple(StageView(i, width[i]) for i in sorted(width))
        return GraphView(found, (), (), "subtasks" if found else "none")
    n = len(identity.parallelism)
    edges: list[EdgeView] = []
    if identity.edges:
        for text in identity.edges:
            m = _EDGE.match(text)
            if m is None:
                continue  # an edge of a later kstream: the stages still show
            src, dst = int(m[1]), int(m[2])
            kind = m[4] + (f" side {m[5]}" if m[5] else "")
            edges.append(EdgeView(src, dst, int(m[3]), kind, src >= dst))
    else:  # a line: each stage fed by the one before it
        edges = [EdgeView(i - 1, i, 0, "", False) for i in range(1, n)]
    fed = {e.target for e in edges if not e.loop}
    sources = iter(identity.sources)
    stages = []
    for i, width_i in enumerate(identity.parallelism):
        source = next(sources, "") if i not in fed else ""
        # ``edge:`` nodes write the channels the edges draw already.
        ops = tuple(
            o.removeprefix(f"s{i}.")
            for o in identity.operators
            if o.startswith(f"s{i}.") and not o.startswith(f"s{i}.edge:")
        )
        stages.append(StageView(i, width_i, source, ops))
    return GraphView(tuple(stages), tuple(edges), identity.sinks, "identity")


@dataclass(slots=True)
class _Ack:
    message: Acked | Declined
    at: float | None


def dashboard_view(
    job: str,
    messages: Sequence[ControlMessage],
    now: float,
    identity: JobIdentity | None = None,
) -> DashboardView:
    """The dashboard of `job` from its control `messages` (topic order) at wall-clock `now`.

    `identity` (the runner's own plan) stands in for the graph until a
    completion records one; a recorded identity wins (it is the job that ran).
    """
    status = job_status(job, messages, now)
    clock: float | None = None
    acks: dict[tuple[int, int], list[_Ack]] = {}
    recorded: JobIdentity | None = None
    states: dict[str, Acked] = {}
    beats: dict[str, WorkerAlive] = {}
    for m in messages:
        when = getattr(m, "time", None)
        if isinstance(when, float | int) and not isinstance(when, bool):
            clock = float(when) if clock is None else max(clock, float(when))
        if isinstance(m, Acked | Declined):
            acks.setdefault((m.checkpoint, m.generation), []).append(_Ack(m, clock))
            if isinstance(m, Acked) and m.unaligned and m.in_flight > 0:
                states[m.task] = m
        elif isinstance(m, Completed) and m.identity is not None:
            recorded = m.identity
        elif isinstance(m, WorkerAlive):
            beats[m.worker] = m
    reports = {(a.task, b.generation): a for b in beats.values() for a in b.alignment}
    seen_tasks = {t.subtask for t in status.subtasks}
    graph = graph_of(recorded or identity, seen_tasks)
    tasks = sorted(
        {f"s{s.index}-{i}" for s in graph.stages for i in range(s.parallelism)} | seen_tasks,
        key=_task_key,
    )
    records = checkpoint_history(messages)
    rows = []
    for r in records[-HISTORY:]:
        mine = acks.get((r.checkpoint, r.generation), []) if r.generation is not None else []
        rows.append(
            CheckpointRow(
                r.checkpoint,
                r.generation,
                r.status,
                r.reason,
                r.started_by,
                r.triggered_at,
                r.duration_s,
                r.alignment_ms,
                r.size,
                sum(isinstance(a.message, Acked) for a in mine),
                _slowest(mine, r.triggered_at),
            )
        )
    flights = []
    pending: set[str] = set()
    recording: set[str] = set()
    for r in records:
        if r.status != "in progress":
            continue
        mine = acks.get((r.checkpoint, r.generation), []) if r.generation is not None else []
        parts = {a.message.task: _part(a.message) for a in mine}
        for task in tasks:
            if task not in parts:
                parts[task] = _pending(task, r.checkpoint, reports.get((task, r.generation or 0)))
                pending.add(task)
                if parts[task].recording:
                    recording.add(task)
        flights.append(
            InFlight(
                r.checkpoint,
                r.generation,
                r.triggered_at,
                None if r.triggered_at is None else max(0.0, now - r.triggered_at),
                tuple(parts[t] for t in sorted(parts, key=_task_key)),
            )
        )
    restoring = any(w.alive and w.restoring for w in status.workers)
    current = {t.subtask for t in status.subtasks if t.generation >= status.generation}
    subtask_states = tuple(
        (
            task,
            "recording channel state"
            if task in recording
            else "aligning"
            if task in pending
            else "restoring"
            if restoring and task not in current
            else "running",
        )
        for task in tasks
    )
    kept = tuple(
        Recorded(t, a.checkpoint, a.generation, a.in_flight, _channels(a))
        for t, a in sorted(states.items(), key=lambda kv: _task_key(kv[0]))
    )
    return DashboardView(status, graph, tuple(rows), tuple(flights), subtask_states, kept)


def _channels(m: Acked) -> tuple[tuple[str, int], ...]:
    return tuple(
        (f"{topic}[{p}]", off)
        for topic, parts in sorted(m.channel_offsets.items())
        for p, off in sorted(parts.items())
    )


def _pending(task: str, checkpoint: int, report: SubtaskAlignment | None) -> SubtaskPart:
    if report is None:
        return SubtaskPart(task, "pending")
    return SubtaskPart(
        task,
        "pending",
        inputs=report.channels,
        arrived=report.arrived if report.checkpoint == checkpoint else (),
        recording=report.recording if report.recording_for == checkpoint else (),
    )


def _part(m: Acked | Declined) -> SubtaskPart:
    if isinstance(m, Declined):
        return SubtaskPart(m.task, "declined", reason=m.reason)
    return SubtaskPart(m.task, "acked", m.unaligned, m.in_flight, _channels(m))


def _slowest(acks: list[_Ack], triggered_at: float | None) -> SlowestAck | None:
    done = [a for a in acks if isinstance(a.message, Acked)]
    if not done:
        return None
    # The last to ack in topic order: its ack's time is the latest (clocks only grow).
    last = done[-1]
    m = last.message
    assert isinstance(m, Acked)
    after = None if last.at is None or triggered_at is None else max(0.0, last.at - triggered_at)
    return SlowestAck(m.task, after, m.alignment_ms, m.sync_ms, m.size, m.unaligned, m.in_flight)
