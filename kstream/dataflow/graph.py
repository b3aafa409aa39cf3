"""The dataflow graph a job is built as: nodes (operators, edges, sinks), the inputs of
stages, stages, and `Graph`, which grows them as the builder (`kstream.dataflow.stream`)
is called. Read by the planner and the runtime; users never build it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kstream.dataflow.inputs import Source
from kstream.dataflow.outputs import Sink
from kstream.errors import ConfigurationError

__all__ = ["Graph", "Input", "Node", "Stage", "children", "sink_nodes"]


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
    #: A process or co_process node: the id its keyed state is stored under (`Stream.uid`);
    #: "" for its `name`.
    uid: str = ""

    @property
    def state_name(self) -> str:
        """What a keyed operator's state is stored under in its stage: its uid, or its name."""
        return self.uid or self.name


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


class Graph:
    """The stages of one job as the builder grows them: what every stream of the job
    holds, so that the streams need not know the `Job` (the builder's front).

    `stages` is in topological order of the forward edges (every forward edge goes
    from an existing stage to a newer one); `tables` maps the topics read as
    tables to whether they must be compacted; `name` is the job's.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.stages: list[Stage] = []
        #: Topics read as tables (`KeyedStream.enrich`) → whether they must be compacted;
        #: `kstream run` refuses a table topic that must be and is not.
        self.tables: dict[str, bool] = {}

    def edge(
        self, parent: Stage, at: Node, key_fn: Callable[[Any], Any] | None, parallelism: int | None
    ) -> Stage:
        node = Node("input", name=f"stage{len(self.stages)}")
        stage = Stage(len(self.stages), node, parallelism)
        self.stages.append(stage)
        self.connect(parent, at, stage, key_fn)
        return stage

    def connect(
        self, parent: Stage, at: Node, stage: Stage, key_fn: Callable[[Any], Any] | None
    ) -> None:
        """Add an input to `stage`: an edge from node `at` of stage `parent`."""
        edge = Node("edge", edge_to=stage, edge_input=len(stage.inputs))
        at.children.append(edge)
        stage.inputs.append(Input(parent, key_fn, len(stage.inputs), edge))

    def merge(self, into: Stage, other: Stage, side: int) -> None:
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
