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

A job is a graph, not a line: it may have several sources; a stage may have
several **inputs** (`Input`), each an edge with its own channel topic:
`union` merges streams, `connect` feeds two keyed streams into one
co-process whose two functions share the key's state; a stream may feed
several operators, edges and sinks (fan-out), but a keyed stream feeds one
keyed function (its state is that function's: `key_by` again for another); a
process function may yield
`Tagged(tag, value)` to send a value to the side output `tag`, consumed by
`stream.side_output(tag)` in the same stage. Every forward edge goes from an
existing stage to a newer one, so stage order is a topological order of them.

A job may also hold **loops**: `head = stream.iterate(name)` starts a stage
whose values are the stream's and those fed back by `head.feed_back(later)`,
where `later` is a stream downstream of the head (in its stage or a later
one). The feedback edge is the only edge from a later stage to an earlier (or
the same) one; it is marked `loop` (`Input.loop`) and carried by its own
channel topic. `Job.validate` refuses a loop that is never closed and loops
that cross (:ref:`barriers-cycles`).

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

from kstream.dataflow.channel_serde import ChannelSerde, RecordType
from kstream.dataflow.channel_serde import channel_serde as channel_serde_named
from kstream.dataflow.serde import Serde
from kstream.dataflow.state import KeyedContext, ValueState
from kstream.dataflow.state_serde import StateSerde
from kstream.dataflow.state_serde import state_serde as state_serde_named
from kstream.errors import ConfigurationError
from kstream.protocol.names import check_job_name
from kstream.protocol.watermarks import WatermarkConfig

if TYPE_CHECKING:
    # Types only: this layer stays pure (the runtime's modules import confluent_kafka).
    from kstream.dataflow.window_operator import WindowedStream
    from kstream.dataflow.windows import Assigner
    from kstream.runtime.sink import SinkContext, SinkWriter

__all__ = [
    "ConnectedStreams",
    "ErrorPolicy",
    "Input",
    "IterationHead",
    "Job",
    "KeyedStream",
    "Node",
    "Sink",
    "Source",
    "Stage",
    "StartPosition",
    "Stream",
    "Tagged",
    "TimerFn",
    "Timestamps",
    "ValueState",
    "children",
    "sink_nodes",
]

ErrorPolicy = Literal["dead-letter", "skip", "fail"]
#: Where a source starts reading when no checkpoint says where it was.
StartPosition = Literal["earliest", "latest"]


ProcessFn = Callable[[Any, Any, KeyedContext], Iterable[Any] | None]
#: ``on_timer(key, timestamp, ctx)``: what a keyed operator emits when one of its timers fires.
TimerFn = Callable[[Any, int, KeyedContext], Iterable[Any] | None]
#: How a source stamps records with event time: the Kafka record's timestamp,
#: a function of the decoded value returning milliseconds, or None (no event time).
Timestamps = Literal["kafka"] | Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class Tagged:
    """A value a process function sends to side output `tag` instead of its main output.

    Yield it from a keyed `process` or a co-process function; the value goes to
    the stream `side_output(tag)` of that operator, in the same stage. A tag
    nobody consumes is a record error (the job's `on_error` policy), never a
    silent loss.
    """

    tag: str
    value: Any


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
    `snapshot_every`  by every source subtask once when it opens
    ================= ========================================================

    Implemented by `kstream.connectors.kafka.KafkaSource`.
    """

    #: The Kafka topic read. Subtask s of P reads its partitions p with p % P == s.
    topic: str
    #: Where to start without a checkpoint: the earliest retained record or the end.
    start: StartPosition
    #: Event time of its records (None: the stream has none; see `watermark_config`).
    timestamps: Timestamps = None
    #: Seconds between the snapshots each of its subtasks starts itself (None:
    #: only the coordinator's and requested ones; `kstream.protocol.initiation`).
    snapshot_every: float | None = None

    def watermark_config(self) -> WatermarkConfig:
        """How its subtasks make watermarks from the timestamps (read when one opens)."""
        return WatermarkConfig()

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

    kind: Literal[
        "source",
        "input",
        "map",
        "filter",
        "flat_map",
        "process",
        "co_process",
        "side",
        "sink",
        "edge",
    ]
    fn: Callable[..., Any] | None = None
    sink: Sink | None = None
    edge_to: Stage | None = None
    name: str = ""
    children: list[Node] = field(default_factory=list)
    #: An edge node: which input of `edge_to` it feeds.
    edge_input: int = 0
    #: A co_process node: one function per side (`Input.side`), `fn` being side 0's.
    fns: tuple[Callable[..., Any], ...] = ()
    #: A process or co_process node: its side outputs by tag (``side`` nodes).
    side_outputs: dict[str, Node] = field(default_factory=dict)
    #: A process or co_process node: called as ``on_timer(key, ts, ctx)`` when a timer fires.
    on_timer: Callable[..., Any] | None = None


@dataclass(eq=False)
class Input:
    """One edge into a stage: from `upstream`, hashed by `key_fn` (None: round-robin).

    `index` numbers the stage's inputs from 0 (it names the input's channel
    topic); `edge` is the ``edge`` node in the upstream stage that writes it;
    `side` is which function of a co-process receives its values (0 otherwise);
    `loop` marks a feedback edge (`IterationHead.feed_back`): its upstream is
    the stage itself or a later one.
    """

    upstream: Stage
    key_fn: Callable[[Any], Any] | None
    index: int
    edge: Node
    side: int = 0
    loop: bool = False


@dataclass(eq=False)
class Stage:
    """Operators fused into one subtask; fed by a source or by edges (`inputs`).

    A stage's inputs are all keyed (hash partitioned by their own key
    functions) or all round-robin; a source stage (`source` set) has none.
    """

    index: int
    root: Node
    parallelism: int | None
    source: Source | None = None
    inputs: list[Input] = field(default_factory=list)
    #: An iteration head (`Stream.iterate`): the loop's name, else None.
    iterate: str | None = None
    #: Placement (`Stream.on_worker`): subtask i runs on worker (worker + i) % workers.
    worker: int = 0

    @property
    def forward_inputs(self) -> list[Input]:
        """Its inputs without the feedback edges (`Input.loop`)."""
        return [i for i in self.inputs if not i.loop]

    @property
    def keyed(self) -> bool:
        return any(i.key_fn is not None for i in self.inputs)

    @property
    def key_fn(self) -> Callable[[Any], Any] | None:
        """The first input's key function (None for a source or round-robin stage)."""
        return self.inputs[0].key_fn if self.inputs else None

    @property
    def upstream(self) -> Stage | None:
        """The first input's upstream stage (None for a source stage)."""
        return self.inputs[0].upstream if self.inputs else None

    @property
    def timed(self) -> bool:
        """Whether its records carry event time: its source has timestamps, or its
        inputs come from timed stages (`Job.validate` refuses a mix)."""
        if self.source is not None:
            return self.source.timestamps is not None
        inputs = self.forward_inputs
        return bool(inputs) and all(i.upstream.timed for i in inputs)


def sink_nodes(node: Node) -> list[Node]:
    """The sink nodes under `node`, depth-first in child order (the order subtasks open them)."""
    if node.kind == "sink":
        return [node]
    return [s for c in children(node) for s in sink_nodes(c)]


def children(node: Node) -> list[Node]:
    """Where `node`'s values go: its children, then its side outputs in tag order."""
    if not node.side_outputs:
        return node.children
    return [*node.children, *(node.side_outputs[t] for t in sorted(node.side_outputs))]


class Job:
    """A named dataflow graph. The name scopes internal topics, state and transactions."""

    def __init__(
        self,
        name: str,
        *,
        parallelism: int | None = None,
        on_error: ErrorPolicy = "dead-letter",
        state_serde: str | StateSerde = "msgpack",
        channel_serde: str | ChannelSerde | Iterable[RecordType] = "msgpack",
        allow_feedback: bool = False,
    ) -> None:
        check_job_name(name)
        if on_error not in ("dead-letter", "skip", "fail"):
            raise ConfigurationError(f"on_error must be dead-letter, skip or fail: {on_error!r}")
        self.name = name
        self.parallelism = parallelism
        self.on_error: ErrorPolicy = on_error
        #: How keyed state is encoded: "msgpack" (default), "json", "trusted-pickle"
        #: or a `StateSerde`; snapshots record its name and refuse another.
        self.state_serde: StateSerde = state_serde_named(state_serde)
        #: How stream records cross channels: "msgpack" (default, built-in types),
        #: a `ChannelSerde` or `RecordType`s declaring the job's own record types,
        #: or "trusted-pickle" (loading runs code; see `kstream.dataflow.channel_serde`).
        self.channel_serde: ChannelSerde = channel_serde_named(channel_serde)
        #: Whether a sink may write a topic the job reads (its own input fed back
        #: to it: each output is read again, without end unless the job filters);
        #: `kstream run` refuses such a job otherwise (`--allow-feedback`).
        self.allow_feedback = allow_feedback
        self.stages: list[Stage] = []
        #: Topics read as tables (`KeyedStream.enrich`) → whether they must be compacted;
        #: `kstream run` refuses a table topic that must be and is not.
        self.tables: dict[str, bool] = {}

    def rename(self, name: str) -> None:
        """Give the job another name (e.g. from `--job-name`); before it runs."""
        self.name = check_job_name(name)

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
        stage = Stage(len(self.stages), node, parallelism)
        self.stages.append(stage)
        self._connect(parent, at, stage, key_fn)
        return stage

    def _connect(
        self, parent: Stage, at: Node, stage: Stage, key_fn: Callable[[Any], Any] | None
    ) -> None:
        """Add an input to `stage`: an edge from node `at` of stage `parent`."""
        edge = Node("edge", edge_to=stage, edge_input=len(stage.inputs))
        at.children.append(edge)
        stage.inputs.append(Input(parent, key_fn, len(stage.inputs), edge))

    def _merge(self, into: Stage, other: Stage, side: int) -> None:
        """Move every input of the fresh keyed stage `other` into `into` (as side `side`).

        `other` disappears and `into` (fresh: nothing reads it yet) moves to the
        end, after every stage that feeds it, so stage order stays topological;
        stages are renumbered (channel topics are named when the job is
        planned, so nothing named is renamed).
        """
        both = None not in (into.parallelism, other.parallelism)
        if both and into.parallelism != other.parallelism:
            raise ConfigurationError(
                f"cannot merge keyed streams of parallelism {into.parallelism} and "
                f"{other.parallelism}: give them the same parallelism"
            )
        into.parallelism = into.parallelism or other.parallelism
        for inp in other.inputs:
            inp.index, inp.side = len(into.inputs), side
            inp.edge.edge_to, inp.edge.edge_input = into, inp.index
            into.inputs.append(inp)
        self.stages.remove(other)
        self.stages.remove(into)
        self.stages.append(into)
        for i, stage in enumerate(self.stages):
            stage.index = i

    def validate(self) -> None:
        """Raise `ConfigurationError` for a graph that cannot run."""
        if not self.stages:
            raise ConfigurationError(f"job {self.name} has no source")

        def ends(node: Node) -> bool:
            return node.kind in ("sink", "edge") or any(ends(c) for c in children(node))

        for stage in self.stages:
            if not ends(stage.root):
                raise ConfigurationError(f"stage {stage.index} of job {self.name} has no sink")
            if stage.parallelism is not None and stage.parallelism < 1:
                raise ConfigurationError(f"parallelism must be >= 1, got {stage.parallelism}")
            for inp in stage.forward_inputs:
                # The API only adds forward edges from existing stages to new ones;
                # the only backward edges are the loops' feedback edges.
                if inp.upstream.index >= stage.index:
                    raise ConfigurationError(
                        f"stage {stage.index} of job {self.name} reads stage "
                        f"{inp.upstream.index}: a cycle that is not a loop "
                        "(close loops with iterate/feed_back)"
                    )
            _check_event_time(stage, self.name)
        _check_loops(self)


def _check_loops(job: Job) -> None:
    """Refuse loops never closed, event time in a loop, and loops that cross.

    Loop i spans the stages [head, tail]; two loops may be disjoint or one
    nested in the other, never overlap partly: the barriers of crossing loops
    would each wait on the other's channel state.
    """
    spans: list[tuple[int, int, str]] = []
    for stage in job.stages:
        if stage.iterate is None:
            continue
        loops = [i for i in stage.inputs if i.loop]
        if not loops:
            raise ConfigurationError(
                f"iterate {stage.iterate!r} of job {job.name} is never closed: "
                "call feed_back(stream) on it"
            )
        if stage.timed:
            raise ConfigurationError(
                f"iterate {stage.iterate!r} of job {job.name} reads a stream with timestamps: "
                "loops do not carry event time yet"
            )
        spans.append((stage.index, loops[0].upstream.index, stage.iterate))
    for h1, t1, a in spans:
        for h2, t2, b in spans:
            if h1 < h2 <= t1 < t2:
                raise ConfigurationError(
                    f"loops {a!r} (stages {h1}-{t1}) and {b!r} (stages {h2}-{t2}) of job "
                    f"{job.name} cross: nest one loop inside the other or keep them apart"
                )


def _check_event_time(stage: Stage, job: str) -> None:
    """Refuse inputs with and without timestamps in one stage, and timers without them."""
    timed = {i.upstream.timed for i in stage.inputs}
    if len(timed) > 1:
        raise ConfigurationError(
            f"stage {stage.index} of job {job} joins streams with and without timestamps: "
            "give every source timestamps=, or none"
        )
    if stage.timed:
        return

    def refuse(node: Node) -> None:
        if node.on_timer is not None:
            raise ConfigurationError(
                f"{node.kind} {node.name} in stage {stage.index} of job {job} has on_timer, "
                "but its stream has no timestamps: give its source timestamps= "
                "(e.g. KafkaSource(..., timestamps='kafka'))"
            )
        for c in children(node):
            refuse(c)

    refuse(stage.root)


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

    def union(self, *others: Stream, parallelism: int | None = None) -> Stream:
        """The values of this stream and of `others`, in a new stage fed round-robin.

        Each member is its own input (its own channel topic); the order between
        members is whatever order their channels are read in.
        """
        members = [self, *others]
        for other in others:
            if not isinstance(other, Stream):
                raise ConfigurationError(_not_unkeyed(other))
            if other._job is not self._job:
                raise ConfigurationError("union of streams of two different jobs")
        if len({id(m._node) for m in members}) < len(members):
            raise ConfigurationError(
                "union of a stream with itself (every value would arrive twice): "
                "use flat_map to duplicate values"
            )
        stage = self._job._edge(self._stage, self._node, None, parallelism)
        for other in others:
            self._job._connect(other._stage, other._node, stage, None)
        return Stream(self._job, stage, stage.root)

    def connect(self, other: Any) -> ConnectedStreams:
        """Refused: only keyed streams connect (`a.key_by(f).connect(b.key_by(g))`)."""
        raise ConfigurationError(
            "connect needs two keyed streams: a.key_by(f).connect(b.key_by(g)), "
            "so that both sides of a key meet in one subtask and share its state"
        )

    def side_output(self, tag: str) -> Stream:
        """The values this process function yielded as `Tagged(tag, value)`, in this stage."""
        if self._node.kind not in ("process", "co_process"):
            raise ConfigurationError(
                f"side_output({tag!r}) follows a process function, not a {self._node.kind} operator"
            )
        if not isinstance(tag, str) or not tag:
            raise ConfigurationError(f"a side output's tag is a non-empty string, got {tag!r}")
        node = self._node.side_outputs.get(tag)
        if node is None:
            node = self._node.side_outputs[tag] = Node("side", name=tag)
        return Stream(self._job, self._stage, node)

    def iterate(self, name: str, *, parallelism: int | None = None) -> IterationHead:
        """The head of a loop: a new stage (fed round-robin, like `rebalance`) whose
        values are this stream's and those `feed_back` returns to it.

        Close the loop with ``head.feed_back(stream)``, `stream` downstream of the
        head. The head's snapshot waits for barriers on its forward inputs only
        and logs its loop channel as channel state (:ref:`barriers-cycles`).
        """
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"an iterate's name is a non-empty string, got {name!r}")
        taken = [s.iterate for s in self._job.stages if s.iterate is not None]
        if name in taken:
            raise ConfigurationError(f"job {self._job.name} has two loops named {name!r}")
        stage = self._job._edge(self._stage, self._node, None, parallelism)
        stage.iterate = name
        stage.root.name = f"iterate {name}"
        return IterationHead(self._job, stage, stage.root)

    def feed_back(self, stream: Stream) -> None:
        """Refused: only the stream `iterate` returned takes a feedback edge."""
        raise ConfigurationError(
            "feed_back closes a loop: call it on the stream iterate(...) returned, "
            "not on a stream derived from it"
        )

    def on_worker(self, worker: int) -> Stream:
        """Place this stream's stage: its subtask i runs on worker ``(worker + i) % workers``
        instead of ``i % workers``; returns this stream.

        For stages that must not share a worker process, so that a crash takes
        down one of them alone (the seeds' two processes p and q). Placement
        changes no result, only which worker process runs which subtask.
        """
        if type(worker) is not int or worker < 0:
            raise ConfigurationError(f"on_worker takes a worker index >= 0, got {worker!r}")
        self._stage.worker = worker
        return self

    def sink(self, sink: Sink) -> None:
        """Write every value to `sink`."""
        if not isinstance(sink, Sink):
            raise ConfigurationError(
                f"{sink!r} is not a kstream Sink (subclass kstream.Sink, e.g. KafkaSink)"
            )
        self._node.children.append(Node("sink", sink=sink, name=sink.name))


class IterationHead(Stream):
    """The head of a loop (`Stream.iterate`): its values, then `feed_back` to close it."""

    def feed_back(self, stream: Stream) -> None:
        """Send every value of `stream` back into this head (the loop's feedback edge).

        `stream` must be downstream of the head: in the head's stage or in a
        stage fed (through forward edges) by it. A head is closed once.
        """
        head, name = self._stage, self._stage.iterate
        if not isinstance(stream, Stream):
            raise ConfigurationError(
                f"feed_back of iterate {name!r} takes an unkeyed stream, got {stream!r}"
            )
        if stream._job is not self._job:
            raise ConfigurationError(f"feed_back of iterate {name!r} from another job's stream")
        if any(i.loop for i in head.inputs):
            raise ConfigurationError(f"iterate {name!r} is closed already (feed_back twice)")
        if not _downstream(head, stream._stage):
            raise ConfigurationError(
                f"feed_back of iterate {name!r} from stage {stream._stage.index}, which the "
                f"head (stage {head.index}) does not feed: a loop returns what the head sent on"
            )
        self._job._connect(stream._stage, stream._node, head, None)
        head.inputs[-1].loop = True


def _downstream(head: Stage, stage: Stage) -> bool:
    """Whether `stage` is `head` or reached from it through forward edges."""
    seen, todo = set(), [head]
    while todo:
        s = todo.pop()
        if s is stage:
            return True
        seen.add(id(s))
        todo += [t for t in _successors(s) if id(t) not in seen]
    return False


def _successors(stage: Stage) -> list[Stage]:
    """The stages `stage`'s forward edges feed."""
    out: list[Stage] = []

    def walk(node: Node) -> None:
        if node.kind == "edge" and node.edge_to is not None:
            inp = node.edge_to.inputs[node.edge_input]
            if not inp.loop:
                out.append(node.edge_to)
        for c in children(node):
            walk(c)

    walk(stage.root)
    return out


def _not_unkeyed(other: object) -> str:
    if isinstance(other, KeyedStream):
        return "union of an unkeyed stream with a keyed one: key_by every member, or none"
    return f"union takes streams, got {other!r}"


class KeyedStream:
    """A stream partitioned by key: the input of keyed, stateful operators.

    `union` and `connect` merge keyed streams into one stage whose inputs keep
    their own key functions; a keyed stream that was merged is spent (use what
    `union` or `connect` returned).
    """

    def __init__(self, job: Job, stage: Stage, node: Node) -> None:
        self._job = job
        self._stage = stage
        self._node = node
        self._spent = False

    def _check_fresh(self, what: str) -> None:
        if self._spent:
            raise ConfigurationError(
                f"{what}: this keyed stream was already united or connected; use the result"
            )
        if self._node.children:
            raise ConfigurationError(f"{what}: this keyed stream already feeds a function")

    def _absorb(self, others: tuple[Any, ...], what: str, side: int | None) -> None:
        """Merge the stages of `others` into this one (each as side `side`, or 0..n)."""
        self._check_fresh(what)
        for other in others:
            if not isinstance(other, KeyedStream):
                raise ConfigurationError(
                    f"{what} of a keyed stream with an unkeyed one: key_by every member, or none"
                )
            if other is self or other._stage is self._stage:
                raise ConfigurationError(f"{what} of a keyed stream with itself")
            if other._job is not self._job:
                raise ConfigurationError(f"{what} of streams of two different jobs")
            other._check_fresh(what)
        for n, other in enumerate(others, start=1):
            self._job._merge(self._stage, other._stage, n if side is None else side)
            other._spent = True
        self._spent = True

    def union(self, *others: KeyedStream) -> KeyedStream:
        """One keyed stream of the values of this and `others`, each keyed by its own key
        function: one hop into one stage, not a union followed by another `key_by`."""
        self._absorb(others, "union", 0)
        return KeyedStream(self._job, self._stage, self._node)

    def connect(self, other: KeyedStream) -> ConnectedStreams:
        """This stream (side 0) and `other` (side 1) into one co-process sharing keyed state."""
        self._absorb((other,), "connect", None)
        return ConnectedStreams(self._job, self._stage, self._node)

    def process(
        self, fn: ProcessFn, on_timer: TimerFn | None = None, name: str = "process"
    ) -> Stream:
        """Call `fn(key, value, ctx)` per value; it yields outputs (or returns None) and may
        change the key's state through `ctx` (a `KeyedContext`).

        `on_timer(key, ts, ctx)` is called when a timer the function registered
        (``ctx.timers``) fires, and yields outputs like `fn`; event-time timers
        need a stream with timestamps.
        """
        if self._spent:
            self._check_fresh("process")
        if self._node.children:
            # The stage's keyed state is its one function's (`s<stage>.<name>`).
            raise ConfigurationError(
                "a keyed stream feeds exactly one process function (the key's state is "
                "that function's): call key_by again on the stream for another function"
            )
        node = Node("process", fn=fn, name=name, on_timer=on_timer)
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

        return self.process(reduce_values, name=name)

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

        return self.process(aggregate_values, name=name)

    def count(self, name: str = "count") -> Stream:
        """Per value, emit ``(key, n)``: the number of values of the key so far."""
        return self.process(_count, name=name)

    def window(self, assigner: Assigner, *, allowed_lateness: int = 0) -> WindowedStream:
        """Event-time windows of each key: `tumbling`, `sliding` or `session`; finish with
        ``.aggregate(...)``, ``.apply(fn)`` or ``.count()`` (`WindowedStream`)."""
        # Imported here: the window operator's module imports this one (for `Tagged`).
        from kstream.dataflow.window_operator import WindowedStream

        return WindowedStream(self, assigner, allowed_lateness)

    def interval_join(
        self, other: KeyedStream, lower: int, upper: int, name: str = "interval_join"
    ) -> Stream:
        """Pairs of this stream's records l and `other`'s r of one key with
        ``l.ts - lower <= r.ts <= l.ts + upper``, as ``{"key", "left", "right",
        "timestamp"}``; too-late records go to ``side_output("late")``."""
        from kstream.dataflow.joins import interval_join_functions

        left, right, on_timer = interval_join_functions(lower, upper)
        return self.connect(other).process(left, right, on_timer=on_timer, name=name)

    def enrich(self, table: KeyedStream, *, compacted: bool = True, name: str = "enrich") -> Stream:
        """Each record with `table`'s value of its key as of the record's event time, as
        ``{"key", "value", "table", "timestamp"}``. `table` reads a table topic (latest
        value per key, None a tombstone), which must be compacted unless `compacted` is
        False; too-late records go to ``side_output("late")``."""
        from kstream.dataflow.joins import enrichment_functions

        for inp in table._stage.inputs:
            source = inp.upstream.source
            if source is None:
                raise ConfigurationError(
                    "enrich reads its table straight from a source: "
                    "job.source(KafkaSource(topic)).key_by(...)"
                )
            self._job.tables[source.topic] = compacted
        stream, table_fn, on_timer = enrichment_functions()
        return self.connect(table).process(stream, table_fn, on_timer=on_timer, name=name)


class ConnectedStreams:
    """Two keyed streams meeting in one stage: the input of a co-process."""

    def __init__(self, job: Job, stage: Stage, node: Node) -> None:
        self._job = job
        self._stage = stage
        self._node = node

    def process(
        self,
        first: ProcessFn,
        second: ProcessFn,
        on_timer: TimerFn | None = None,
        name: str = "co_process",
    ) -> Stream:
        """Call `first(key, value, ctx)` for the first stream's values and `second(...)`
        for the second's; both see the same state of the key (one `KeyedContext`)
        and yield outputs. `on_timer(key, ts, ctx)` serves the timers of both."""
        if self._node.children:
            raise ConfigurationError("connected streams feed exactly one co-process")
        node = Node("co_process", fn=first, fns=(first, second), name=name, on_timer=on_timer)
        self._node.children.append(node)
        return Stream(self._job, self._stage, node)


#: Marks "no state yet" (None is a valid state value).
_NONE: Any = object()


def _count(key: Any, _: Any, ctx: KeyedContext) -> tuple[tuple[Any, int]]:
    n: int = ctx.get(0) + 1
    ctx.set(n)
    return ((key, n),)
