"""The ends of a subtask's chain: its sinks' writers and its channel writers.

`compile_chain` (`kstream.runtime.worker.chain`) calls `Ends.open_sink` and
`Ends.open_edge` for each end as it compiles, in compile order: a sink is
named by its place in that order (``name#ordinal``), which is also how its
snapshots and its commit-marker partition are found again after a restore.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kstream.dataflow.graph import Node
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.dataflow.plan import Plan, TaskSpec, input_topic
from kstream.runtime.channels.format import BatchFormat
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.checkpoint.restore import Restored
from kstream.runtime.state.element import ElementContext
from kstream.runtime.worker.context import TaskContext
from kstream.runtime.worker.dead_letters import RecordErrors

__all__ = ["Ends", "ResultCount"]

End = Callable[[Any], None]


class ResultCount(Protocol):
    """Where results handed to sinks that do not count them are counted
    (`SinkWriter.handed`; the subtask's statistics)."""

    records_out: int


class Ends:
    """Opens the sink writers and channel writers of subtask `spec` as its chain compiles.

    `channel_producer`: the producer channel records go through (the shared
    one, counted by flow control). `source_position`: how sinks learn the
    source record behind a result (sources only, for lineage headers).
    """

    def __init__(
        self,
        ctx: TaskContext,
        spec: TaskSpec,
        *,
        channel_producer: Any,
        errors: RecordErrors,
        element: ElementContext,
        batch_format: BatchFormat,
        key_bytes: Callable[[Any], bytes],
        max_parallelism: int,
        counts: ResultCount,
        source_position: Callable[[], tuple[str, int, int] | None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.spec = spec
        self._channel_producer = channel_producer
        self._errors = errors
        self._element = element
        self._batch_format = batch_format
        self._key_bytes = key_bytes
        #: Key groups of hash edges (0: key formats 1 and 2, routed by crc32 % D).
        self._max_parallelism = max_parallelism
        self._counts = counts
        self._source_position = source_position
        #: Sink writers by name (``<sink name>#<ordinal>``), in compile order.
        self.sinks: dict[str, SinkWriter] = {}
        #: The sink nodes of `sinks`, in the same order.
        self._sink_nodes: list[Node] = []
        #: Channel writers to the next stages, in compile order.
        self.writers: list[ChannelWriter] = []

    def open_sink(self, node: Node) -> End:
        """Open the writer of sink `node` (numbered in compile order) and count its results."""
        assert node.sink is not None
        ctx = self.ctx
        ordinal = len(self.sinks)
        writer: SinkWriter = node.sink.open(
            SinkContext(
                ctx.bootstrap,
                ctx.plan.job.name,
                self.spec.id,
                ctx.generation,
                ctx.producer,
                guarantee=ctx.guarantee,
                marker_partition=ctx.plan.marker_partition(self.spec, ordinal),
                transaction_timeout_ms=ctx.transaction_timeout_ms,
                pump=ctx.ports.pump,
                raise_if_undelivered=ctx.ports.raise_if_undelivered,
                source_position=self._source_position,
                max_record_bytes=ctx.max_record_bytes,
                event_time=self._event_time() if self._element.timed else None,
                refused=functools.partial(self._errors.on_sink_refused, node.sink.name),
            )
        )
        self.sinks[f"{node.sink.name}#{ordinal}"] = writer
        self._sink_nodes.append(node)
        write, counts = writer.write, self._counts
        if writer.handed is not None:
            # It counts its results itself (`records_out`): no wrapper call per result.
            return write

        def counted(value: Any) -> None:
            counts.records_out += 1
            write(value)

        return counted

    def open_edge(self, node: Node) -> End:
        """Open the channel writer of edge `node` to the next stage."""
        assert node.edge_to is not None
        ctx, target = self.ctx, node.edge_to
        inp = target.inputs[node.edge_input]
        element = self._element
        cw = ChannelWriter(
            self._channel_producer,
            input_topic(ctx.plan.job.name, target.index, inp),
            self.spec.index,
            ctx.plan.parallelism[target.index],
            ctx.generation,
            inp.key_fn,
            max_bytes=ctx.max_record_bytes,
            on_too_large=self._errors.on_channel_record_too_large,
            element=element if element.timed else None,
            batch_format=self._batch_format,
            on_unencodable=self._errors.on_channel_record_unencodable,
            key_bytes=self._key_bytes,
            max_parallelism=self._max_parallelism,
        )
        self.writers.append(cw)
        return cw.send

    def start(self, restored: Restored) -> None:
        """Recover every sink from what `restored` kept of it and begin its first epoch.

        Restored at another parallelism, it first settles the sinks of the old
        subtasks it inherits (`Restored.inherited`), each under the old
        subtask's name and commit-marker partition: what their completed
        checkpoint sealed is committed once, what they left open is aborted.
        """
        if self.ctx.guarantee == "exactly-once":
            # Only two-phase sinks hold epochs to settle (or transactions to fence).
            for j, kept in restored.inherited:
                self._settle(restored, j, kept)
        for name, writer in self.sinks.items():
            writer.recover(restored.checkpoint, restored.kept(name))
            writer.begin_epoch(restored.epoch)

    def _settle(self, restored: Restored, index: int, kept: Mapping[str, SinkSnapshot]) -> None:
        """Recover old subtask `index`'s sinks under its name, then close them."""
        ctx, stage = self.ctx, self.spec.stage
        # Each stage's old parallelism, from its first old snapshot: the old
        # layout numbers the commit-marker partitions.
        assert restored.checkpoint is not None
        old = tuple(
            ctx.storage.load(restored.checkpoint, f"s{s.index}-0").parallelism
            or ctx.plan.parallelism[s.index]
            for s in ctx.plan.job.stages
        )
        before = Plan(ctx.plan.job, ctx.plan.workers, old)
        task = TaskSpec(stage, index, old[stage])
        for ordinal, node in enumerate(self._sink_nodes):
            assert node.sink is not None
            writer = node.sink.open(
                SinkContext(
                    ctx.bootstrap,
                    ctx.plan.job.name,
                    task.id,
                    ctx.generation,
                    ctx.producer,
                    guarantee=ctx.guarantee,
                    marker_partition=before.marker_partition(task, ordinal),
                    transaction_timeout_ms=ctx.transaction_timeout_ms,
                    pump=ctx.ports.pump,
                    raise_if_undelivered=ctx.ports.raise_if_undelivered,
                    max_record_bytes=ctx.max_record_bytes,
                )
            )
            try:
                name = f"{node.sink.name}#{ordinal}"
                writer.recover(restored.checkpoint, kept.get(name, SinkSnapshot({}, None)))
            finally:
                writer.close()

    def _event_time(self) -> Callable[[], int | None]:
        element = self._element

        def event_time() -> int | None:
            return element.timestamp

        return event_time
