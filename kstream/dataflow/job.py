"""The job API: a dataflow graph of Python operators.

    job = Job("wordcount")
    (job.source(KafkaSource("words"))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count_words)
        .sink(KafkaSink("word-counts")))

Operators between two `key_by` / `rebalance` calls form a **stage** and run
fused in one subtask; each `key_by` / `rebalance` is an edge carried by an
internal Kafka topic. A keyed `process` function receives the key, the value
and the key's `ValueState`, and yields outputs.

Every function must be deterministic in its inputs and state for exactly-once
results; functions are shipped to worker processes by importing the job spec,
so lambdas are fine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kstream.errors import ConfigurationError

__all__ = [
    "ErrorPolicy",
    "Job",
    "KeyedStream",
    "Node",
    "Sink",
    "Source",
    "Stage",
    "Stream",
    "ValueState",
    "sink_nodes",
]

ErrorPolicy = Literal["dead-letter", "skip", "fail"]


class ValueState(Protocol):
    """The state of the current key inside a keyed `process` function."""

    def get(self, default: Any = None) -> Any:
        """The key's value, or `default` if it has none."""

    def set(self, value: Any) -> None:
        """Replace the key's value (persisted with the next snapshot)."""

    def clear(self) -> None:
        """Remove the key's value."""


ProcessFn = Callable[[Any, Any, ValueState], Iterable[Any]]


class Source(Protocol):
    """A description of where records come from; the runtime builds the reader.

    Implemented by connectors (e.g. `kstream.connectors.kafka.KafkaSource`).
    """

    @property
    def name(self) -> str:
        """A label for logs."""

    def partitions(self, bootstrap: str) -> int:
        """Number of input partitions; subtask s of P reads partitions p with p % P == s."""


class Sink(Protocol):
    """A description of where results go; the runtime builds the writer per subtask."""

    @property
    def name(self) -> str:
        """A label for logs."""


@dataclass(eq=False)
class Node:
    """One operator inside a stage. `children` receive its outputs, in order."""

    kind: Literal["source", "input", "map", "filter", "flat_map", "process", "sink", "edge"]
    fn: Callable[..., Any] | None = None
    sink: Sink | None = None
    edge_to: Stage | None = None
    name: str = ""
    children: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class Stage:
    """Operators fused into one subtask; fed by a source or by an edge.

    `key_fn` is set for stages fed by `key_by` (hash partitioned); None means a
    source stage (`source` set) or a `rebalance` (round-robin) stage.
    """

    index: int
    root: Node
    parallelism: int | None
    source: Source | None = None
    key_fn: Callable[[Any], Any] | None = None
    upstream: Stage | None = None

    @property
    def keyed(self) -> bool:
        return self.key_fn is not None


def sink_nodes(node: Node) -> list[Node]:
    """The sink nodes under `node`, depth-first in child order (the order subtasks open them)."""
    if node.kind == "sink":
        return [node]
    return [s for c in node.children for s in sink_nodes(c)]


class Job:
    """A named dataflow graph. The name scopes internal topics, state and transactions."""

    def __init__(
        self,
        name: str,
        *,
        parallelism: int | None = None,
        on_error: ErrorPolicy = "dead-letter",
    ) -> None:
        if not name or any(c in name for c in " /\\:"):
            raise ConfigurationError(
                f"job name {name!r} must be non-empty, without spaces or / \\ :"
            )
        if on_error not in ("dead-letter", "skip", "fail"):
            raise ConfigurationError(f"on_error must be dead-letter, skip or fail: {on_error!r}")
        self.name = name
        self.parallelism = parallelism
        self.on_error: ErrorPolicy = on_error
        self.stages: list[Stage] = []

    def rename(self, name: str) -> None:
        """Give the job another name (e.g. from `--job-name`); before it runs."""
        Job(name)  # validates
        self.name = name

    def source(self, source: Source, *, parallelism: int | None = None) -> Stream:
        """Start a stream reading `source`."""
        node = Node("source", name=source.name)
        stage = Stage(len(self.stages), node, parallelism, source=source)
        self.stages.append(stage)
        return Stream(self, stage, node)

    def _edge(
        self, parent: Stage, at: Node, key_fn: Callable[[Any], Any] | None, parallelism: int | None
    ) -> Stage:
        node = Node("input", name=f"stage{len(self.stages)}")
        stage = Stage(len(self.stages), node, parallelism, key_fn=key_fn, upstream=parent)
        self.stages.append(stage)
        at.children.append(Node("edge", edge_to=stage))
        return stage

    def validate(self) -> None:
        """Raise `ConfigurationError` for a graph that cannot run."""
        if not self.stages:
            raise ConfigurationError(f"job {self.name} has no source")

        def ends(node: Node) -> bool:
            return node.kind in ("sink", "edge") or any(ends(c) for c in node.children)

        for stage in self.stages:
            if not ends(stage.root):
                raise ConfigurationError(f"stage {stage.index} of job {self.name} has no sink")
            if stage.parallelism is not None and stage.parallelism < 1:
                raise ConfigurationError(f"parallelism must be >= 1, got {stage.parallelism}")


class Stream:
    """A stream of values inside one stage."""

    def __init__(self, job: Job, stage: Stage, node: Node) -> None:
        self._job = job
        self._stage = stage
        self._node = node

    def _then(self, node: Node) -> Stream:
        self._node.children.append(node)
        return Stream(self._job, self._stage, node)

    def map(self, fn: Callable[[Any], Any], name: str = "map") -> Stream:
        """One output per value."""
        return self._then(Node("map", fn=fn, name=name))

    def filter(self, fn: Callable[[Any], bool], name: str = "filter") -> Stream:
        """Keep the values for which `fn` is true."""
        return self._then(Node("filter", fn=fn, name=name))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], name: str = "flat_map") -> Stream:
        """Zero or more outputs per value."""
        return self._then(Node("flat_map", fn=fn, name=name))

    def key_by(self, fn: Callable[[Any], Any], *, parallelism: int | None = None) -> KeyedStream:
        """Partition by `fn(value)` into a new stage (crosses an internal Kafka topic)."""
        stage = self._job._edge(self._stage, self._node, fn, parallelism)
        return KeyedStream(self._job, stage, stage.root)

    def rebalance(self, *, parallelism: int | None = None) -> Stream:
        """Spread values round-robin over a new stage (crosses an internal Kafka topic)."""
        stage = self._job._edge(self._stage, self._node, None, parallelism)
        return Stream(self._job, stage, stage.root)

    def sink(self, sink: Sink) -> None:
        """Write every value to `sink`."""
        self._node.children.append(Node("sink", sink=sink, name=sink.name))


class KeyedStream:
    """A stream partitioned by key: the input of keyed, stateful operators."""

    def __init__(self, job: Job, stage: Stage, node: Node) -> None:
        self._job = job
        self._stage = stage
        self._node = node

    def process(self, fn: ProcessFn, name: str = "process") -> Stream:
        """Call `fn(key, value, state)` per value; it yields outputs and may change state."""
        if self._node.children:
            raise ConfigurationError("a keyed stream feeds exactly one process function")
        node = Node("process", fn=fn, name=name)
        self._node.children.append(node)
        return Stream(self._job, self._stage, node)
