"""What a starting runner checks of those before it: the refusals and the clean-up.

Before a runner coordinates a job it makes sure that nothing else does
(another runner of the job name on the cluster), that what it would resume is
still there (the control topic's history of a checkpoint on disk, the channel
and commit-marker records that checkpoint reads), and, when no checkpoint is
resumed, that no earlier run's records are read as this run's. Each check
decides with a pure function of `kstream.protocol.presence` or
`kstream.protocol.resume_check` and does the I/O here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from confluent_kafka import TopicPartition

from kstream.dataflow.plan import Plan
from kstream.errors import (
    AlreadyRunningError,
    CheckpointError,
    ConfigurationError,
    InternalTopicLostError,
)
from kstream.infra.admin import Admin
from kstream.protocol.messages import ControlMessage, Recovered
from kstream.protocol.names import commit_topic, control_topic, runner_group
from kstream.protocol.presence import (
    SLOW_ROUND_S,
    last_presence,
    needs_wait,
    still_alive,
    wait_s,
)
from kstream.protocol.resume_check import (
    Need,
    StoredCheckpoint,
    channel_needs,
    lost_history,
    marker_need,
    refusal,
    unmet,
)
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage
from kstream.runtime.control import ControlReader

__all__ = [
    "clear_earlier_records",
    "refuse_if_coordinated_elsewhere",
    "refuse_if_history_lost",
    "refuse_if_topics_lost",
]


def refuse_if_coordinated_elsewhere(
    bootstrap: str, job: str, history: list[ControlMessage], say: Callable[[str], None]
) -> None:
    """Raise `AlreadyRunningError` if another runner coordinates `job` on `bootstrap`.

    The file lock only sees runners sharing the state directory; this sees
    any runner of the job name on the cluster (`kstream.protocol.presence`). A
    predecessor that did not say it stopped is given `wait_s` to prove it
    is alive with a heartbeat; one that crashed only delays this start.
    """
    last = last_presence(history)
    if last is None or not needs_wait(last, time.time()):
        return
    reader = ControlReader.at_end(bootstrap, job, runner_group(job))
    seen: list[ControlMessage] = []

    def refuse_if_alive() -> None:
        alive = still_alive(seen)
        if alive is not None:
            raise AlreadyRunningError(
                f"job {job} is already running on {bootstrap}: its "
                f"runner ({alive.describe()}) is alive; stop it first, or use "
                "another --job-name"
            )

    try:
        deadline = time.monotonic() + wait_s(last)
        while time.monotonic() < deadline:
            seen += [m for _, m in reader.poll(0.2)]
            refuse_if_alive()
        # The wait is wall-clock time at this end: whatever the other runner wrote
        # meanwhile counts, even if this reader fetched it slowly (on a loaded host
        # a new consumer's first fetch took seconds, and a live runner was taken
        # over). So read up to the end as of now, its open transactions settled.
        seen += [m for _, m in reader.read_to_end(settle=SLOW_ROUND_S)]
        refuse_if_alive()
    finally:
        reader.close()
    say(
        f"the last runner of job {job} ({last.describe()}) did not say it "
        f"stopped and sent no heartbeat for {wait_s(last):.0f}s: taking over"
    )


def refuse_if_history_lost(
    storage: ManagedCheckpointStorage,
    plan: Plan,
    completed: tuple[int, ...],
    messages: list[ControlMessage],
) -> None:
    """Raise `InternalTopicLostError` if a checkpoint is on disk but the control
    topic, which names `completed`, lost its history
    (`kstream.protocol.resume_check.lost_history`): resuming would start from
    scratch and read the whole input again."""
    stored = storage.completed()
    if not stored:
        return
    n = stored[-1]
    generations = []
    for task in plan.tasks:
        try:
            generations.append(storage.load(n, task.id).generation)
        except CheckpointError:
            continue  # a part never stored: the others tell the generation
    started = max((m.generation for m in messages if isinstance(m, Recovered)), default=0)
    why = lost_history(StoredCheckpoint(n, max(generations, default=0)), completed, started)
    if why is not None:
        name = plan.job.name
        raise InternalTopicLostError(refusal(name, n, control_topic(name), why))


def refuse_if_topics_lost(
    storage: ManagedCheckpointStorage,
    plan: Plan,
    admin: Admin,
    checkpoint: int | None,
    *,
    channels: bool = True,
) -> None:
    """Raise `InternalTopicLostError` if a channel or commit-marker topic lost records
    `checkpoint`, the one to resume, reads (`kstream.protocol.resume_check.unmet`).
    `channels` False: the channels are not read from the checkpoint's offsets (a
    rescale lays them out anew), only the commit markers are checked."""
    n = checkpoint
    if n is None:
        return
    name = plan.job.name
    needs: list[Need] = []
    for task in plan.tasks:
        meta = storage.load(n, task.id)
        if channels:
            needs += channel_needs(meta.channel_offsets, meta.channel_replay)
        for sink_name, kept in meta.sink.items():
            label, _, ordinal = sink_name.rpartition("#")
            try:
                sink = plan.sink(task, int(ordinal))
                partition = plan.marker_partition(task, int(ordinal))
            except (ValueError, ConfigurationError):
                continue  # not a sink of this job (resumed across changes)
            if sink.name != label:
                continue  # another sink there now: no writer recovers these epochs
            need = marker_need(commit_topic(name), partition, kept, markers=sink.commit_markers)
            if need is not None:
                needs.append(need)
    read = sorted({need.topic for need in needs if need.end > 0})
    if not read:
        return
    existing = admin.topics()
    marks = {t: admin.watermarks(t) if t in existing else None for t in read}
    problem = unmet(needs, marks)
    if problem is not None:
        raise InternalTopicLostError(refusal(name, n, *problem))


def clear_earlier_records(
    admin: Admin, job: str, earlier: Iterable[str], say: Callable[[str], None]
) -> None:
    """Delete what an earlier run of job `job` left in its channel and commit-marker
    topics (`earlier`, those that existed before this run), before the first
    generation the control topic knows of.

    Generations count from the control topic: without its history (a job
    started with --fresh after it was deleted) this run's generations
    restart at 1, and an earlier run's channel records of the same number
    would read as this run's, as would its commit markers. Nothing here is
    restored (no checkpoint is resumed), so all of it goes.
    """
    tps = [
        TopicPartition(topic, p, high)
        for topic in sorted(earlier)
        for p, (low, high) in admin.watermarks(topic).items()
        if high > low
    ]
    if tps:
        admin.delete_records_before(tps)
        say(
            f"job {job} starts its first generation: records an earlier run "
            f"left in {', '.join(sorted({tp.topic for tp in tps}))} are deleted"
        )
