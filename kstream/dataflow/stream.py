"""The streams of the job API: what `Job.source` returns and every operator call
chains on (`Stream`, `KeyedStream`, `ConnectedStreams`, `WindowedStream`,
`IterationHead`). Each holds the job's `Graph` and grows it.

They are generic in what they carry, so that a type checker follows a job from
its source to its sinks: ``Stream[T]``, ``KeyedStream[K, V]`` (key, value),
``ConnectedStreams[K, V, W]``, ``WindowedStream[K, V]``. A `KeyedStream` is not
a `Stream`: it feeds one keyed function, and the type refuses ``map`` on it
before the run would. Connecting or closing a loop is only offered where it
works (`KeyedStream.connect`, `IterationHead.feed_back`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Generic, Self, TypeVar, overload

from kstream.dataflow.deprecated import renamed, required
from kstream.dataflow.graph import Graph, Node, Stage, children
from kstream.dataflow.operators.joins import enrichment_functions, interval_join_functions
from kstream.dataflow.operators.window import (
    Aggregation,
    Apply,
    WindowFunction,
    counting,
    window_functions,
)
from kstream.dataflow.operators.windows import Assigner, Session, Sliding, TimeWindow, Tumbling
from kstream.dataflow.outputs import Sink
from kstream.dataflow.state.api import KeyedContext
from kstream.dataflow.types import K, KeyedFn, O, OnTimer, T, U, V, W
from kstream.errors import ConfigurationError

#: The accumulator of an aggregation.
A = TypeVar("A")


class Stream(Generic[T]):
    """A stream of values of type `T` inside one stage."""

    def __init__(self, graph: Graph, stage: Stage, node: Node) -> None:
        self._graph = graph
        self._stage = stage
        self._node = node

    def _then(self, node: Node) -> Stream[Any]:
        self._node.children.append(node)
        return Stream(self._graph, self._stage, node)

    def map(self, fn: Callable[[T], U], name: str = "map") -> Stream[U]:
        """One output per value."""
        return self._then(Node("map", fn=fn, name=name))

    def filter(self, fn: Callable[[T], object], name: str = "filter") -> Stream[T]:
        """Keep the values for which `fn` is true."""
        return self._then(Node("filter", fn=fn, name=name))

    def flat_map(self, fn: Callable[[T], Iterable[U]], name: str = "flat_map") -> Stream[U]:
        """Zero or more outputs per value."""
        return self._then(Node("flat_map", fn=fn, name=name))

    def key_by(self, fn: Callable[[T], K], *, parallelism: int | None = None) -> KeyedStream[K, T]:
        """Partition by `fn(value)` into a new stage (crosses an internal Kafka topic)."""
        stage = self._graph.edge(self._stage, self._node, fn, parallelism)
        return KeyedStream(self._graph, stage, stage.root)

    def rebalance(self, *, parallelism: int | None = None) -> Stream[T]:
        """Spread values round-robin over a new stage (crosses an internal Kafka topic)."""
        stage = self._graph.edge(self._stage, self._node, None, parallelism)
        return Stream(self._graph, stage, stage.root)

    def union(self, *others: Stream[T], parallelism: int | None = None) -> Stream[T]:
        """The values of this stream and of `others`, in a new stage fed round-robin.

        Each member is its own input (its own channel topic); the order between
        members is whatever order their channels are read in.
        """
        members = [self, *others]
        for other in others:
            if not isinstance(other, Stream):
                raise ConfigurationError(_not_unkeyed(other))
            if other._graph is not self._graph:
                raise ConfigurationError("union of streams of two different jobs")
        if len({id(m._node) for m in members}) < len(members):
            raise ConfigurationError(
                "union of a stream with itself (every value would arrive twice): "
                "use flat_map to duplicate values"
            )
        stage = self._graph.edge(self._stage, self._node, None, parallelism)
        for other in others:
            self._graph.connect(other._stage, other._node, stage, None)
        return Stream(self._graph, stage, stage.root)

    def uid(self, uid: str) -> Self:
        """Store this keyed operator's state (and timers) under `uid` instead of its name.

        State is found again by it: in a savepoint (``kstream run --from-savepoint``),
        state whose id no operator of the job has is refused, so a uid set once lets the
        operator be renamed, or its function replaced, keeping its state. The default is
        its name (``s<stage>.<name>``); a stage has one keyed operator, so it is unique.
        """
        node = self._node
        if node.kind not in ("process", "co_process"):
            raise ConfigurationError(
                f"uid({uid!r}) names a keyed operator's state; it follows a process "
                f"function, not a {node.kind} operator"
            )
        if not isinstance(uid, str) or not uid or any(c in uid for c in ".\0/"):
            raise ConfigurationError(
                f"an operator uid is a non-empty string without '.', '/' or NUL, got {uid!r}"
            )
        node.uid = uid
        return self

    def side_output(self, tag: str) -> Stream[Any]:
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
        return Stream(self._graph, self._stage, node)

    def iterate(self, name: str, *, parallelism: int | None = None) -> IterationHead[T]:
        """The head of a loop: a new stage (fed round-robin, like `rebalance`) whose
        values are this stream's and those `feed_back` returns to it.

        Close the loop with ``head.feed_back(stream)``, `stream` downstream of the
        head. The head's snapshot waits for barriers on its forward inputs only
        and logs its loop channel as channel state (:ref:`barriers-cycles`).
        """
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"an iterate's name is a non-empty string, got {name!r}")
        taken = [s.iterate for s in self._graph.stages if s.iterate is not None]
        if name in taken:
            raise ConfigurationError(f"job {self._graph.name} has two loops named {name!r}")
        stage = self._graph.edge(self._stage, self._node, None, parallelism)
        stage.iterate = name
        stage.root.name = f"iterate {name}"
        return IterationHead(self._graph, stage, stage.root)

    def on_worker(self, worker: int) -> Self:
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

    def sink(self, sink: Sink[T]) -> None:
        """Write every value to `sink`."""
        if not isinstance(sink, Sink):
            raise ConfigurationError(
                f"{sink!r} is not a kstream Sink (subclass kstream.Sink, e.g. KafkaSink)"
            )
        self._node.children.append(Node("sink", sink=sink, name=sink.name))


class IterationHead(Stream[T]):
    """The head of a loop (`Stream.iterate`): its values, then `feed_back` to close it.

    Only the head takes a feedback edge: a stream derived from it has no
    `feed_back` (it is a plain `Stream`).
    """

    def feed_back(self, stream: Stream[T]) -> None:
        """Send every value of `stream` back into this head (the loop's feedback edge).

        `stream` must be downstream of the head: in the head's stage or in a
        stage fed (through forward edges) by it. A head is closed once.
        """
        head, name = self._stage, self._stage.iterate
        if not isinstance(stream, Stream):
            raise ConfigurationError(
                f"feed_back of iterate {name!r} takes an unkeyed stream, got {stream!r}"
            )
        if stream._graph is not self._graph:
            raise ConfigurationError(f"feed_back of iterate {name!r} from another job's stream")
        if any(i.loop for i in head.inputs):
            raise ConfigurationError(f"iterate {name!r} is closed already (feed_back twice)")
        if not _downstream(head, stream._stage):
            raise ConfigurationError(
                f"feed_back of iterate {name!r} from stage {stream._stage.index}, which the "
                f"head (stage {head.index}) does not feed: a loop returns what the head sent on"
            )
        self._graph.connect(stream._stage, stream._node, head, None)
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


class KeyedStream(Generic[K, V]):
    """A stream of values of type `V` partitioned by keys of type `K`: the input of
    keyed, stateful operators. Not a `Stream`: it feeds one keyed function.

    `union` and `connect` merge keyed streams into one stage whose inputs keep
    their own key functions; a keyed stream that was merged is spent (use what
    `union` or `connect` returned).
    """

    def __init__(self, graph: Graph, stage: Stage, node: Node) -> None:
        self._graph = graph
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
            if other._graph is not self._graph:
                raise ConfigurationError(f"{what} of streams of two different jobs")
            other._check_fresh(what)
        for n, other in enumerate(others, start=1):
            self._graph.merge(self._stage, other._stage, n if side is None else side)
            other._spent = True
        self._spent = True

    def union(self, *others: KeyedStream[K, V]) -> KeyedStream[K, V]:
        """One keyed stream of the values of this and `others`, each keyed by its own key
        function: one hop into one stage, not a union followed by another `key_by`."""
        self._absorb(others, "union", 0)
        return KeyedStream(self._graph, self._stage, self._node)

    def connect(self, other: KeyedStream[K, W]) -> ConnectedStreams[K, V, W]:
        """This stream (side 0) and `other` (side 1) into one co-process sharing keyed state."""
        self._absorb((other,), "connect", None)
        return ConnectedStreams(self._graph, self._stage, self._node)

    def process(
        self,
        fn: KeyedFn[K, V, O],
        on_timer: OnTimer[K, O] | None = None,
        name: str = "process",
    ) -> Stream[O]:
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
        return Stream(self._graph, self._stage, node)

    def reduce(self, fn: Callable[[V, V], V], name: str = "reduce") -> Stream[tuple[K, V]]:
        """Per value, emit ``(key, r)`` where r folds the key's values with ``fn(r, value)``.

        The key's first value is its first result. `fn` must return a new value,
        not mutate its arguments (an emitted result is the stored one).
        """

        def reduce_values(key: K, value: V, ctx: KeyedContext) -> tuple[tuple[K, V]]:
            current = ctx.get(_NONE)
            result = value if current is _NONE else fn(current, value)
            ctx.set(result)
            return ((key, result),)

        return self.process(reduce_values, name=name)

    def aggregate(
        self, initial: A, add: Callable[[A, V], A], name: str = "aggregate"
    ) -> Stream[tuple[K, A]]:
        """Per value, emit ``(key, acc)`` where ``acc = add(acc, value)`` starting at `initial`.

        `add` gets a copy of the accumulator (of `initial` for a key's first
        value), so it may mutate and return it without changing results
        emitted before.
        """

        def aggregate_values(key: K, value: V, ctx: KeyedContext) -> tuple[tuple[K, A]]:
            current = ctx.get(_NONE)
            result = add(copy.deepcopy(initial if current is _NONE else current), value)
            ctx.set(result)
            return ((key, result),)

        return self.process(aggregate_values, name=name)

    def count(self, name: str = "count") -> Stream[tuple[K, int]]:
        """Per value, emit ``(key, n)``: the number of values of the key so far."""
        counted: KeyedFn[K, V, tuple[K, int]] = _count
        return self.process(counted, name=name)

    def window(
        self,
        assigner: Assigner,
        *,
        allowed_lateness_ms: int = 0,
        allowed_lateness: int | None = None,
    ) -> WindowedStream[K, V]:
        """Event-time windows of each key: `tumbling`, `sliding` or `session`; finish with
        ``.aggregate(...)``, ``.apply(fn)`` or ``.count()`` (`WindowedStream`).

        A record up to `allowed_lateness_ms` behind the watermark still updates its
        windows. `allowed_lateness` is its deprecated spelling.
        """
        lateness_ms = renamed(
            "window",
            "allowed_lateness_ms",
            allowed_lateness_ms,
            "allowed_lateness",
            allowed_lateness,
            default=0,
            stacklevel=2,
        )
        return WindowedStream(
            self, assigner, required("window", "allowed_lateness_ms", lateness_ms)
        )

    @overload
    def interval_join(
        self,
        other: KeyedStream[K, W],
        lower_ms: int,
        upper_ms: int,
        name: str = "interval_join",
    ) -> Stream[dict[str, Any]]: ...

    @overload
    def interval_join(
        self, other: KeyedStream[K, W], *, lower: int, upper: int, name: str = "interval_join"
    ) -> Stream[dict[str, Any]]: ...

    def interval_join(
        self,
        other: KeyedStream[K, W],
        lower_ms: int | None = None,
        upper_ms: int | None = None,
        name: str = "interval_join",
        *,
        lower: int | None = None,
        upper: int | None = None,
    ) -> Stream[dict[str, Any]]:
        """Pairs of this stream's records l and `other`'s r of one key with
        ``l.ts - lower_ms <= r.ts <= l.ts + upper_ms``, as ``{"key", "left", "right",
        "timestamp"}``; too-late records go to ``side_output("late")``. `lower=` and
        `upper=` are deprecated spellings."""
        lower_ms = renamed("interval_join", "lower_ms", lower_ms, "lower", lower, stacklevel=2)
        upper_ms = renamed("interval_join", "upper_ms", upper_ms, "upper", upper, stacklevel=2)
        left, right, on_timer = interval_join_functions(
            required("interval_join", "lower_ms", lower_ms),
            required("interval_join", "upper_ms", upper_ms),
        )
        return self.connect(other).process(left, right, on_timer=on_timer, name=name)

    def enrich(
        self, table: KeyedStream[K, Any], *, compacted: bool = True, name: str = "enrich"
    ) -> Stream[dict[str, Any]]:
        """Each record with `table`'s value of its key as of the record's event time, as
        ``{"key", "value", "table", "timestamp"}``. `table` reads a table topic (latest
        value per key, None a tombstone), which must be compacted unless `compacted` is
        False; too-late records go to ``side_output("late")``."""
        for inp in table._stage.inputs:
            source = inp.upstream.source
            if source is None:
                raise ConfigurationError(
                    "enrich reads its table straight from a source: "
                    "job.source(KafkaSource(topic)).key_by(...)"
                )
            self._graph.tables[source.topic] = compacted
        stream, table_fn, on_timer = enrichment_functions()
        return self.connect(table).process(stream, table_fn, on_timer=on_timer, name=name)


class ConnectedStreams(Generic[K, V, W]):
    """Two keyed streams, of values `V` and `W` with keys `K`, meeting in one stage:
    the input of a co-process."""

    def __init__(self, graph: Graph, stage: Stage, node: Node) -> None:
        self._graph = graph
        self._stage = stage
        self._node = node

    def process(
        self,
        first: KeyedFn[K, V, O],
        second: KeyedFn[K, W, O],
        on_timer: OnTimer[K, O] | None = None,
        name: str = "co_process",
    ) -> Stream[O]:
        """Call `first(key, value, ctx)` for the first stream's values and `second(...)`
        for the second's; both see the same state of the key (one `KeyedContext`)
        and yield outputs. `on_timer(key, ts, ctx)` serves the timers of both."""
        if self._node.children:
            raise ConfigurationError("connected streams feed exactly one co-process")
        node = Node("co_process", fn=first, fns=(first, second), name=name, on_timer=on_timer)
        self._node.children.append(node)
        return Stream(self._graph, self._stage, node)


#: Marks "no state yet" (None is a valid state value).
_NONE: Any = object()


def _count(key: Any, _: Any, ctx: KeyedContext) -> tuple[tuple[Any, int]]:
    n: int = ctx.get(0) + 1
    ctx.set(n)
    return ((key, n),)


class WindowedStream(Generic[K, V]):
    """A keyed stream cut into event-time windows: finish it with a window function.

    ``keyed.window(tumbling(60_000), allowed_lateness_ms=5_000).count()`` emits
    `window_result` dicts; too-late records go to ``.side_output("late")`` of
    the stream returned.
    """

    def __init__(self, keyed: KeyedStream[K, V], assigner: Assigner, allowed_lateness: int) -> None:
        if not isinstance(assigner, Tumbling | Sliding | Session):
            raise ConfigurationError(
                f"window takes tumbling(size_ms), sliding(size_ms, slide_ms) or "
                f"session(gap_ms), got {assigner!r}"
            )
        self._keyed = keyed
        self._assigner = assigner
        self._allowed_lateness = allowed_lateness

    def _run(self, function: WindowFunction, name: str) -> Stream[dict[str, Any]]:
        process, on_timer = window_functions(self._assigner, self._allowed_lateness, function)
        return self._keyed.process(process, on_timer=on_timer, name=name)

    def aggregate(
        self,
        initial: A,
        add: Callable[[A, V], A],
        result: Callable[[A], Any] | None = None,
        merge: Callable[[A, A], A] | None = None,
        name: str = "window",
    ) -> Stream[dict[str, Any]]:
        """Per window, ``result(acc)`` (or ``acc``) with ``acc = add(acc, value)`` from
        `initial`; session windows need ``merge(acc, other)``."""
        return self._run(Aggregation(initial, add, result, merge), name)

    def apply(
        self, fn: Callable[[K, TimeWindow, tuple[V, ...]], Any], name: str = "window"
    ) -> Stream[dict[str, Any]]:
        """Per window, ``fn(key, window, values)`` over all its values (kept in state)."""
        return self._run(Apply(fn), name)

    def count(self, name: str = "window") -> Stream[dict[str, Any]]:
        """Per window, the number of its values."""
        return self._run(counting(), name)
