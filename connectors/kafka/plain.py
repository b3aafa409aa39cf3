"""`PlainWriter`: a Kafka sink without transactions (at-least-once or at-most-once).

It writes through the worker's shared idempotent producer. At-least-once flushes
at each checkpoint, so a completed checkpoint's outputs are in the log (a
recovery replays what came after); at-most-once never waits.
"""

from __future__ import annotations

from typing import Any

from kstream.connectors.kafka.rows import Encoder, OutputTopic, max_ahead_ms, produce_output
from kstream.connectors.kafka.settings import FLUSH_TIMEOUT_S
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.runtime.kafka import flush

__all__ = ["PlainWriter"]


class PlainWriter(SinkWriter):
    """At-least-once (flush at each checkpoint) or at-most-once (never wait).

    Writes through the worker's shared idempotent producer, whose delivery
    errors the worker collects (`SinkContext.raise_if_undelivered`).
    """

    def __init__(self, sink: OutputTopic, ctx: SinkContext, *, flush: bool) -> None:
        self._topic = sink.topic
        self._row = Encoder(sink, ctx, ctx.max_record_bytes, max_ahead_ms(ctx, sink.topic)).row
        self._producer = ctx.producer
        self._flush = flush
        self._raise_if_undelivered = ctx.raise_if_undelivered
        self.handed: int = 0

    def write(self, value: Any) -> None:
        self.handed += 1
        produce_output(self._producer, self._topic, self._row(value))

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        if self._flush:
            flush(self._producer, FLUSH_TIMEOUT_S, f"sink {self._topic}")
            self._raise_if_undelivered()
        return SinkSnapshot()
