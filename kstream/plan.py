"""The physical plan of a job: parallelism per stage, subtasks, channels, workers.

Deterministic in (job, workers): every worker and the coordinator compute the
same plan independently, so nothing about the topology travels over Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass

from kstream.channel import channel_partitions, channel_topic
from kstream.control import control_topic
from kstream.errors import ConfigurationError
from kstream.job import Job, Stage, sink_nodes

__all__ = ["Plan", "TaskSpec", "commit_topic", "dead_letter_topic", "plan"]


def dead_letter_topic(job: str) -> str:
    return f"kstream.{job}.dead-letters"


def commit_topic(job: str) -> str:
    """Commit markers of transactional sinks: one partition per sink subtask."""
    return f"kstream.{job}.commits"


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
        """Subtask i of every stage runs on worker i % workers."""
        return [t for t in self.tasks if t.index % self.workers == worker]

    def channel_topics(self) -> dict[str, int]:
        """Every internal channel topic with its partition count (upstream x downstream)."""
        out = {}
        for s in self.job.stages:
            if s.upstream is not None:
                up, down = self.parallelism[s.upstream.index], self.parallelism[s.index]
                out[channel_topic(self.job.name, s.index)] = up * down
        return out

    def input_channels(self, task: TaskSpec) -> tuple[str, list[int]]:
        stage = self.job.stages[task.stage]
        if stage.upstream is None:
            raise ConfigurationError(f"stage {task.stage} reads a source, not channels")
        up = self.parallelism[stage.upstream.index]
        return channel_topic(self.job.name, stage.index), channel_partitions(
            task.index, up, task.parallelism
        )

    def marker_partition(self, task: TaskSpec, ordinal: int) -> int:
        """Commit-marker partition of the `ordinal`-th sink (in `sink_nodes` order) of `task`."""
        base = 0
        for stage in self.job.stages:
            for i, _ in enumerate(sink_nodes(stage.root)):
                if stage.index == task.stage and i == ordinal:
                    return base + task.index
                base += self.parallelism[stage.index]
        raise ConfigurationError(f"{task.id} has no sink number {ordinal}")

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


def plan(job: Job, workers: int) -> Plan:
    """Plan `job` on `workers` workers; a stage without parallelism gets `job.parallelism`
    or, failing that, one subtask per worker."""
    if workers < 1:
        raise ConfigurationError(f"--workers must be >= 1, got {workers}")
    job.validate()
    default = job.parallelism or workers
    return Plan(job, workers, tuple(s.parallelism or default for s in job.stages))
