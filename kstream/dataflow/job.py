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

from collections.abc import Iterable

from kstream.dataflow.channel_serde import ChannelSerde, RecordType
from kstream.dataflow.channel_serde import channel_serde as channel_serde_named
from kstream.dataflow.graph import Graph, Node, Stage, children
from kstream.dataflow.inputs import Source, snapshot_every_ms
from kstream.dataflow.state.serde import StateSerde
from kstream.dataflow.state.serde import state_serde as state_serde_named
from kstream.dataflow.stream import Stream
from kstream.dataflow.types import ErrorPolicy, T
from kstream.errors import ConfigurationError
from kstream.protocol.key_groups import DEFAULT_MAX_PARALLELISM, MAX_PARALLELISM_LIMIT
from kstream.protocol.names import check_job_name

__all__ = ["Job"]


class Job:
    """A named dataflow graph. The name scopes internal topics, state and transactions."""

    def __init__(
        self,
        name: str,
        *,
        parallelism: int | None = None,
        max_parallelism: int = DEFAULT_MAX_PARALLELISM,
        on_error: ErrorPolicy = "dead-letter",
        state_serde: str | StateSerde = "msgpack",
        channel_serde: str | ChannelSerde | Iterable[RecordType] = "msgpack",
        allow_feedback: bool = False,
    ) -> None:
        check_job_name(name)
        if on_error not in ("dead-letter", "skip", "fail"):
            raise ConfigurationError(f"on_error must be dead-letter, skip or fail: {on_error!r}")
        if type(max_parallelism) is not int or not 1 <= max_parallelism <= MAX_PARALLELISM_LIMIT:
            raise ConfigurationError(
                f"max_parallelism must be an int from 1 to {MAX_PARALLELISM_LIMIT},"
                f" got {max_parallelism!r}"
            )
        self.graph = Graph(name)
        self.parallelism = parallelism
        #: The number of key groups (`kstream.protocol.key_groups`): no stage may have
        #: more subtasks, and it is fixed for the life of the job's state (a job
        #: with another is another job: its checkpoints are refused).
        self.max_parallelism = max_parallelism
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

    @property
    def name(self) -> str:
        """The job's name: it scopes internal topics, state and transactions."""
        return self.graph.name

    @property
    def stages(self) -> list[Stage]:
        """The job's stages, in topological order of the forward edges."""
        return self.graph.stages

    @property
    def tables(self) -> dict[str, bool]:
        """Topics read as tables (`KeyedStream.enrich`) → whether they must be compacted;
        `kstream run` refuses a table topic that must be and is not."""
        return self.graph.tables

    def rename(self, name: str) -> None:
        """Give the job another name (e.g. from `--job-name`); before it runs."""
        self.graph.name = check_job_name(name)

    def source(self, source: Source[T], *, parallelism: int | None = None) -> Stream[T]:
        """Start a stream reading `source` (a ``Stream[T]`` of a ``Source[T]``)."""
        if not isinstance(source, Source):
            raise ConfigurationError(
                f"{source!r} is not a kstream Source (subclass kstream.Source, e.g. KafkaSource)"
            )
        # Refuses a bad interval now, and warns of the deprecated one in seconds.
        snapshot_every_ms(source, stacklevel=2)
        node = Node("source", name=source.name)
        stage = Stage(len(self.stages), node, parallelism, source=source)
        self.stages.append(stage)
        return Stream(self.graph, stage, node)

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
