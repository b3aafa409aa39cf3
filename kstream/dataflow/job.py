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
and its `KeyedContext` (the key's default `ValueState`, and named value, map,
list, reducing and aggregating states), and yields outputs.

Every function must be deterministic in its inputs and state for exactly-once
results; functions are shipped to worker processes by importing the job spec,
so lambdas are fine.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kstream.dataflow.serde import Serde
from kstream.dataflow.state import KeyedContext, ValueState
from kstream.dataflow.state_serde import StateSerde
from kstream.dataflow.state_serde import state_serde as state_serde_named
from kstream.errors import ConfigurationError

if TYPE_CHECKING:
    # Types only: this layer stays pure (the runtime's modules import confluent_kafka).
    from kstream.runtime.sink import SinkContext, SinkWriter

__all__ = [
    "ErrorPolicy",
    "Job",
    "KeyedStream",
    "Node",
    "Sink",
    "Source",
    "Stage",
    "StartPosition",
    "Stream",
    "ValueState",
    "sink_nodes",
]

ErrorPolicy = Literal["dead-letter", "skip", "fail"]
#: Where a source starts reading when no checkpoint says where it was.
StartPosition = Literal["earliest", "latest"]


ProcessFn = Callable[[Any, Any, KeyedContext], Iterable[Any] | None]


class Source(ABC):
    """Where records come from: a description of a Kafka topic to read.

    The runtime builds the reader itself (a consumer per source subtask that
    keeps its offsets in checkpoints), so a source only answers questions.
    Every process builds the job from its spec, so the answers must be the same
    in every process.

    ================= ========================================================
    member            read or called
    ================= ========================================================
    `name`            when the job graph is built (`Job.source`) and when the
                      job's identity is fingerprinted; must not change
    `partitions`      by the runner once per run, before any worker starts
                      (raising `ConfigurationError` refuses the run), and by
                      every source subtask once when it opens
    `topic`           by every source subtask once when it opens
    `serde`           by every source subtask once when it opens; its `loads`
                      then decodes every record (a `DecodeError` goes to the
                      job's error policy)
    `start`           by every source subtask that opens without a checkpoint
                      to restore (a restored subtask resumes at its offsets)
    ================= ========================================================

    Implemented by `kstream.connectors.kafka.KafkaSource`.
    """

    #: The Kafka topic read. Subtask s of P reads its partitions p with p % P == s.
    topic: str
    #: Where to start without a checkpoint: the earliest retained record or the end.
    start: StartPosition

    @property
    @abstractmethod
    def name(self) -> str:
        """A label for logs, operator names and the job's identity."""

    @property
    @abstractmethod
    def serde(self) -> Serde:
        """Decodes each record's value."""

    @abstractmethod
    def partitions(self, bootstrap: str) -> int:
        """Number of partitions of `topic` on `bootstrap`.

        Raises `ConfigurationError` if the topic does not exist (a run is refused
        before it starts) and `KafkaUnavailableError` if the cluster does not answer.
        """


class Sink(ABC):
    """Where results go: a description from which the runtime opens one writer per subtask.

    ================= ========================================================
    member            read or called
    ================= ========================================================
    `name`            when the job graph is built (`Stream.sink`) and when the
                      job's identity is fingerprinted; with the sink's
                      position, it names the writer's state in checkpoints, so
                      it must not change between runs that resume each other
    `lineage`         by the runner once per run, before any worker starts:
                      True is refused unless the sink is in its source's stage
    `check`           by the runner once per run, before any worker starts and
                      after `lineage` is accepted; raising refuses the run
    `topics`          by every worker once when it starts, to size the record
                      limit of its shared producer
    `open`            in a worker, once per sink subtask per generation (a
                      recovery opens new writers after closing the old ones),
                      never before `check` succeeded in the runner; never
                      called again on the writer's behalf after its `close`
    ================= ========================================================

    The writer `open` returns follows the checkpoint protocol of
    `kstream.runtime.sink.SinkWriter`: `recover` first, then epochs of
    `write`/`pre_commit`, `commit` or `abort`, and no call after `close`.
    Implemented by `kstream.connectors.kafka.KafkaSink`.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """A label for logs and checkpoints; stable across runs."""

    @property
    def lineage(self) -> bool:
        """Whether outputs carry the position of the source record behind them.

        Positions do not cross channels, so the runner refuses a sink that asks
        for them outside its source's stage. Default: False.
        """
        return False

    def check(self, bootstrap: str) -> None:  # noqa: B027 - optional hook
        """Raise `ConfigurationError` if the destination cannot be written (default: none).

        Called in the runner, so a missing destination refuses the run before any
        worker starts instead of failing every subtask.
        """

    def topics(self) -> tuple[str, ...]:
        """Kafka topics the writer may produce to through `SinkContext.producer` (default: none).

        The worker limits its shared producer's records to the smallest record
        limit of these topics (with its channels' and dead letters'), so that a
        too-large output is refused before it is produced.
        """
        return ()

    @abstractmethod
    def open(self, ctx: SinkContext) -> SinkWriter:
        """A new writer for one subtask, as `ctx` describes it.

        Raises `ConfigurationError` for a sink that cannot be written from that
        subtask (it fails the worker, and the run); must not produce anything yet:
        the writer's `recover` comes first.
        """


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
        state_serde: str | StateSerde = "msgpack",
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
        #: How keyed state is encoded: "msgpack" (default), "json", "trusted-pickle"
        #: or a `StateSerde`; snapshots record its name and refuse another.
        self.state_serde: StateSerde = state_serde_named(state_serde)
        self.stages: list[Stage] = []

    def rename(self, name: str) -> None:
        """Give the job another name (e.g. from `--job-name`); before it runs."""
        Job(name)  # validates
        self.name = name

    def source(self, source: Source, *, parallelism: int | None = None) -> Stream:
        """Start a stream reading `source`."""
        if not isinstance(source, Source):
            raise ConfigurationError(
                f"{source!r} is not a kstream Source (subclass kstream.Source, e.g. KafkaSource)"
            )
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
        if not isinstance(sink, Sink):
            raise ConfigurationError(
                f"{sink!r} is not a kstream Sink (subclass kstream.Sink, e.g. KafkaSink)"
            )
        self._node.children.append(Node("sink", sink=sink, name=sink.name))


class KeyedStream:
    """A stream partitioned by key: the input of keyed, stateful operators."""

    def __init__(self, job: Job, stage: Stage, node: Node) -> None:
        self._job = job
        self._stage = stage
        self._node = node

    def process(self, fn: ProcessFn, name: str = "process") -> Stream:
        """Call `fn(key, value, ctx)` per value; it yields outputs (or returns None) and may
        change the key's state through `ctx` (a `KeyedContext`)."""
        if self._node.children:
            raise ConfigurationError("a keyed stream feeds exactly one process function")
        node = Node("process", fn=fn, name=name)
        self._node.children.append(node)
        return Stream(self._job, self._stage, node)

    def reduce(self, fn: Callable[[Any, Any], Any], name: str = "reduce") -> Stream:
        """Per value, emit ``(key, r)`` where r folds the key's values with ``fn(r, value)``.

        The key's first value is its first result. `fn` must return a new value,
        not mutate its arguments (an emitted result is the stored one).
        """

        def reduce_values(key: Any, value: Any, ctx: KeyedContext) -> tuple[tuple[Any, Any]]:
            current = ctx.get(_NONE)
            result = value if current is _NONE else fn(current, value)
            ctx.set(result)
            return ((key, result),)

        return self.process(reduce_values, name)

    def aggregate(
        self, initial: Any, add: Callable[[Any, Any], Any], name: str = "aggregate"
    ) -> Stream:
        """Per value, emit ``(key, acc)`` where ``acc = add(acc, value)`` starting at `initial`.

        `add` gets a copy of the accumulator (of `initial` for a key's first
        value), so it may mutate and return it without changing results
        emitted before.
        """

        def aggregate_values(key: Any, value: Any, ctx: KeyedContext) -> tuple[tuple[Any, Any]]:
            current = ctx.get(_NONE)
            result = add(copy.deepcopy(initial if current is _NONE else current), value)
            ctx.set(result)
            return ((key, result),)

        return self.process(aggregate_values, name)

    def count(self, name: str = "count") -> Stream:
        """Per value, emit ``(key, n)``: the number of values of the key so far."""
        return self.process(_count, name)


#: Marks "no state yet" (None is a valid state value).
_NONE: Any = object()


def _count(key: Any, _: Any, ctx: KeyedContext) -> tuple[tuple[Any, int]]:
    n: int = ctx.get(0) + 1
    ctx.set(n)
    return ((key, n),)
