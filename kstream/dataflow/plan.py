"""The physical plan of a job: parallelism per stage, subtasks, channels, workers.

Deterministic in (job, workers): every worker and the coordinator compute the
same plan independently, so nothing about the topology travels over Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from kstream.dataflow.graph import Input, Stage, sink_nodes
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Sink
from kstream.errors import ConfigurationError
from kstream.protocol.names import (
    channel_topic,
    commit_topic,
    control_topic,
    dead_letter_topic,
    loop_topic,
)

__all__ = [
    "MAX_INTERNAL_PARTITIONS",
    "Plan",
    "TaskSpec",
    "input_topic",
    "plan",
    "started_with",
]


def channel_partitions(downstream: int, upstream_count: int, downstream_count: int) -> list[int]:
    """The partitions (channels) downstream subtask `downstream` reads, one per upstream."""
    return [i * downstream_count + downstream for i in range(upstream_count)]


def input_topic(job: str, stage: int, inp: Input) -> str:
    """The channel topic of input `inp` of `stage`: a loop's own topic for a feedback edge."""
    return loop_topic(job, stage) if inp.loop else channel_topic(job, stage, inp.index)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One subtask: stage `stage`, index `index` of `parallelism`."""

    stage: int
    index: int
    parallelism: int

    @property
    def id(self) -> str:
        return f"s{self.stage}-{self.index}"


@dataclass(frozen=True)
class Plan:
    job: Job
    workers: int
    parallelism: tuple[int, ...]

    @property
    def tasks(self) -> list[TaskSpec]:
        return [
            TaskSpec(s.index, i, self.parallelism[s.index])
            for s in self.job.stages
            for i in range(self.parallelism[s.index])
        ]

    def tasks_of(self, worker: int) -> list[TaskSpec]:
        """Subtask i of stage s runs on worker (i + s's `Stage.worker`) % workers:
        i % workers unless the job placed the stage (`Stream.on_worker`)."""
        stages = self.job.stages
        return [
            t for t in self.tasks if (t.index + stages[t.stage].worker) % self.workers == worker
        ]

    def channel_topics(self) -> dict[str, int]:
        """Every internal channel topic (one per input of a stage) with its partition
        count (upstream x downstream subtasks)."""
        out = {}
        for s in self.job.stages:
            for inp in s.inputs:
                up, down = self.parallelism[inp.upstream.index], self.parallelism[s.index]
                out[input_topic(self.job.name, s.index, inp)] = up * down
        return out

    def input_channels(self, task: TaskSpec) -> list[tuple[str, list[int]]]:
        """Per input of `task`'s stage, in input order: its channel topic and the
        partitions `task` reads (one per upstream subtask)."""
        stage = self.job.stages[task.stage]
        if not stage.inputs:
            raise ConfigurationError(f"stage {task.stage} reads a source, not channels")
        name, par = self.job.name, self.parallelism
        return [
            (
                input_topic(name, stage.index, inp),
                channel_partitions(task.index, par[inp.upstream.index], task.parallelism),
            )
            for inp in stage.inputs
        ]

    def loop_channels(self, task: TaskSpec) -> set[tuple[str, int]]:
        """The channels (topic, partition) `task` reads through a feedback edge: the
        ones its snapshot logs instead of aligning (empty unless it heads a loop)."""
        stage = self.job.stages[task.stage]
        loops = {input_topic(self.job.name, stage.index, i) for i in stage.inputs if i.loop}
        if not loops:
            return set()
        return {(t, p) for t, parts in self.input_channels(task) if t in loops for p in parts}

    def sources(self) -> list[TaskSpec]:
        """The source subtasks in plan order (source subtask i is snapshot initiator 1 + i)."""
        return [t for t in self.tasks if self.stage(t).source is not None]

    def input_writers(self, task: TaskSpec) -> dict[tuple[str, int], TaskSpec]:
        """Each channel (topic, partition) `task` reads, with the upstream subtask writing it."""
        stage = self.stage(task)
        out: dict[tuple[str, int], TaskSpec] = {}
        for inp, (topic, parts) in zip(stage.inputs, self.input_channels(task), strict=True):
            up = inp.upstream.index
            for i, partition in enumerate(parts):
                out[topic, partition] = TaskSpec(up, i, self.parallelism[up])
        return out

    def marker_paths(self, task: TaskSpec) -> dict[int, set[tuple[str, int]]]:
        """Per source subtask (its index in `sources`), the channels of `task` that a
        barrier it writes reaches along channels (empty: none).

        Every upstream subtask writes a barrier into every channel of its edge, so
        a stage is reached from a source subtask once a path of edges (feedback
        edges included) leads there from the source's stage; within the source's
        own stage, only that subtask writes.
        """
        succ: dict[int, set[int]] = {}
        for s in self.job.stages:
            for inp in s.inputs:
                succ.setdefault(inp.upstream.index, set()).add(s.index)
        writers = self.input_writers(task)
        out: dict[int, set[tuple[str, int]]] = {}
        for k, source in enumerate(self.sources()):
            reached: set[int] = set()
            todo = list(succ.get(source.stage, ()))
            while todo:
                index = todo.pop()
                if index not in reached:
                    reached.add(index)
                    todo += succ.get(index, ())
            out[k] = {c for c, w in writers.items() if w == source or (w.stage in reached)}
        return out

    def marker_partition(self, task: TaskSpec, ordinal: int) -> int:
        """Commit-marker partition of the `ordinal`-th sink (in `sink_nodes` order) of `task`."""
        base = 0
        for stage in self.job.stages:
            for i, _ in enumerate(sink_nodes(stage.root)):
                if stage.index == task.stage and i == ordinal:
                    return base + task.index
                base += self.parallelism[stage.index]
        raise ConfigurationError(f"{task.id} has no sink number {ordinal}")

    def sink(self, task: TaskSpec, ordinal: int) -> Sink:
        """The `ordinal`-th sink (in `sink_nodes` order) of `task`'s stage."""
        nodes = sink_nodes(self.job.stages[task.stage].root)
        sink = nodes[ordinal].sink if 0 <= ordinal < len(nodes) else None
        if sink is None:
            raise ConfigurationError(f"{task.id} has no sink number {ordinal}")
        return sink

    def sink_subtasks(self) -> int:
        return sum(
            len(sink_nodes(stage.root)) * self.parallelism[stage.index] for stage in self.job.stages
        )

    def internal_topics(self) -> dict[str, int]:
        return {
            **self.channel_topics(),
            control_topic(self.job.name): 1,
            dead_letter_topic(self.job.name): 1,
            commit_topic(self.job.name): max(1, self.sink_subtasks()),
        }

    def stage(self, task: TaskSpec) -> Stage:
        return self.job.stages[task.stage]


#: Kafka's controller refuses to create more partitions than this in one request
#: ("Excessively large number of partitions per request"), and a job's internal
#: topics are created in one request. A channel between stages of parallelism
#: P and Q has P x Q partitions, so this bounds the workers of a job.
MAX_INTERNAL_PARTITIONS = 10_000


def plan(job: Job, workers: int) -> Plan:
    """Plan `job` on `workers` workers; a stage without parallelism gets `job.parallelism`
    or, failing that, one subtask per worker.

    Raises `ConfigurationError` when a stage would have more subtasks than the
    job's max parallelism (its key groups), or when the job's internal topics
    would need more than `MAX_INTERNAL_PARTITIONS` partitions, naming the
    largest worker count that fits.
    """
    if workers < 1:
        raise ConfigurationError(f"--workers must be >= 1, got {workers}")
    job.validate()
    p = _plan(job, workers)
    k = job.max_parallelism
    for stage, n in zip(job.stages, p.parallelism, strict=True):
        if n > k:
            why = f"--workers {workers}" if stage.parallelism is None else f"parallelism {n}"
            if stage.parallelism is None and job.parallelism is not None:
                why = f"Job(parallelism={n})"
            raise ConfigurationError(
                f"stage {stage.index} of job {job.name} would run {n} subtasks ({why}), "
                f"more than its max parallelism {k}: lower it, or start the job fresh "
                "with a larger Job(max_parallelism=...)"
            )
    need = sum(p.internal_topics().values())
    if need > MAX_INTERNAL_PARTITIONS:
        fits = _most_workers(job, workers)
        biggest = max(p.channel_topics().items(), key=lambda kv: kv[1], default=None)
        why = f" ({biggest[0]} alone: {biggest[1]:,})" if biggest else ""
        hint = f"use --workers {fits} or fewer" if fits else "lower the stages' parallelism"
        raise ConfigurationError(
            f"--workers {workers} needs {need:,} partitions for the job's internal topics{why}; "
            f"Kafka creates at most {MAX_INTERNAL_PARTITIONS:,} at once: {hint}"
        )
    return p


def _plan(job: Job, workers: int) -> Plan:
    default = job.parallelism or workers
    return Plan(job, workers, tuple(s.parallelism or default for s in job.stages))


def _most_workers(job: Job, below: int) -> int | None:
    """The largest worker count < `below` whose internal topics fit (0 if none: None)."""
    lo, hi = 0, below - 1  # invariant: lo fits (0 standing for none), everything > hi fails
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(_plan(job, mid).internal_topics().values()) <= MAX_INTERNAL_PARTITIONS:
            lo = mid
        else:
            hi = mid - 1
    return lo or None


def started_with(job: Job, existing: dict[str, int], workers: int) -> str | None:
    """Why the internal topics in `existing` (name -> partitions) do not fit `workers`.

    None when every existing internal topic of the job has the partition count
    the plan on `workers` workers needs. Otherwise a message that names the
    worker count the job was started with (the count whose plan matches the
    topics), or says the stages' parallelism changed when no count matches.
    """
    p = plan(job, workers)
    wanted = p.internal_topics()
    channels = p.channel_topics()
    # A channel topic tells the layout best (upstream x downstream subtasks): name it first.
    # The commit-marker topic may have more partitions than the plan needs: a job
    # rescaled to fewer sink subtasks keeps the markers of the old ones.
    commits = commit_topic(job.name)
    wrong = sorted(
        (
            t
            for t, n in existing.items()
            if t in wanted and (n < wanted[t] if t == commits else n != wanted[t])
        ),
        key=lambda t: (t not in channels, t),
    )
    if not wrong:
        return None
    topic = wrong[0]
    # Name the worker count only where it sets the count: stages whose parallelism
    # the job fixes (`Job(parallelism=...)`) make the same topics on any --workers.
    if _plan(job, workers + 1).internal_topics().get(topic) != wanted[topic]:
        need = f"{wanted[topic]} with {workers} worker{'s' if workers != 1 else ''}"
    else:
        need = f"{wanted[topic]} with the parallelism the job sets now"
    have = f"{topic} has {existing[topic]} partitions, {need}"
    advice = "or start it under a new --job-name; it has no checkpoint with key groups to rescale"
    fits = _most_workers(job, MAX_INTERNAL_PARTITIONS + 1) or 0
    for w in range(1, fits + 1):
        topics = _plan(job, w).internal_topics()
        if all(topics.get(t, n) == n for t, n in existing.items()):
            return (
                f"job {job.name} was started with {w} worker{'s' if w != 1 else ''} ({have}); "
                "run it again with "
                f"--workers {w}, {advice}"
            )
    return (
        f"job {job.name} was started with another parallelism ({have}); run it with the "
        f"parallelism it was started with, {advice}"
    )
