"""`KafkaSink`: the description of a user topic a job writes, and the choice of writer.

Values may be ``(key, value)`` pairs or plain values (key None). `KafkaSink.open`
picks the writer by the job's guarantee: `TransactionalWriter`
(`kstream.connectors.kafka.transactional`, exactly-once: the two-phase commit of
the checkpoint protocol, :ref:`two-phase-commit`) or `PlainWriter`
(`kstream.connectors.kafka.plain`, at-least-once or at-most-once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kstream.connectors.kafka.plain import PlainWriter
from kstream.connectors.kafka.transactional import TransactionalWriter
from kstream.dataflow.outputs import Sink, SinkContext, SinkWriter, T_contra
from kstream.dataflow.serde import Serde
from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin

__all__ = ["KafkaSink"]


@dataclass(frozen=True)
class KafkaSink(Sink[T_contra]):
    """Write results to `topic` with key/value serdes (`str` by default).

    ``KafkaSink("t")`` is a ``KafkaSink[Any]``: it takes results of any type (a
    pair or a value, whatever the serdes write); annotate ``KafkaSink[X]`` to
    have the type checker hold a job to results of type X.

    A result that is a 2-tuple is a (key, value) pair; anything else is a value
    without a key. The `str` serde writes text, bytes, numbers and values with
    their own ``__str__``; a dict, list, other tuple or set has no text form and
    is a record error (a dead letter by default) naming ``value_serde="json"``.

    The job's guarantee picks the writer: exactly-once (transactions, the
    default), at-least-once (flush at each checkpoint, replays after a
    recovery) or at-most-once (no flush, no replay).

    With `lineage=True` every output carries the position of the source record
    behind it in the `LINEAGE_HEADERS` (topic, partition, offset as decimal
    text), which `kstream audit --check lineage` verifies. Lineage needs the sink
    in its source's stage (no `key_by` before it): positions do not cross channels.
    """

    topic: str
    key_serde: str | Serde[Any] = "str"
    value_serde: str | Serde[Any] = "str"
    lineage: bool = False

    @property
    def name(self) -> str:
        return f"kafka:{self.topic}"

    @property
    def commit_markers(self) -> bool:
        # Exactly-once: each epoch's transaction carries its marker, and a
        # recovery re-publishes the kept epochs after the newest committed one.
        # The other guarantees keep no epochs, so they need no markers either.
        return True

    def topics(self) -> tuple[str, ...]:
        return (self.topic,)

    def check(self, bootstrap: str) -> None:
        if Admin(bootstrap).partitions(self.topic) is None:
            raise ConfigurationError(
                f"output topic {self.topic!r} does not exist on {bootstrap}; create it first, "
                "or run with --create-topics"
            )

    def open(self, ctx: SinkContext) -> SinkWriter:
        if self.lineage and ctx.source_position is None:
            raise ConfigurationError(
                f"sink {self.topic!r}: lineage=True needs the sink in its source's stage "
                "(no key_by or rebalance before it)"
            )
        if ctx.guarantee == "exactly-once":
            return TransactionalWriter(self, ctx)
        return PlainWriter(self, ctx, flush=ctx.guarantee == "at-least-once")
