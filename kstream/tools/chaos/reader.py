"""The checker's reads: plain confluent-kafka consumers, nothing of kstream's runtime.

`OutputReader` follows the output topic with ``isolation.level=read_committed``
for the whole campaign, so it sees each record when it becomes visible (that
time places it in a fault window) and keeps every record for the verdict.
`read_input` reads the input topic as it ended up, to its high watermarks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kstream.errors import KafkaUnavailableError
from kstream.infra.client_settings import client_config
from kstream.tools.chaos.verdict import Output

__all__ = ["OutputReader", "read_input", "read_to_end"]

#: How long the checker waits for the cluster's metadata or a whole read.
READ_TIMEOUT_S = 120.0
#: A live reader that got nothing for this long checks that it is not stuck.
STALL_S = 20.0
#: How long that check waits for a record.
PROBE_S = 5.0


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    # Only the connection (and its security settings) is kstream's: what is read
    # and how it is judged is the checker's own.
    return Consumer(
        client_config(
            bootstrap,
            {
                "group.id": f"kstream-chaos-check-{uuid.uuid4().hex[:10]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": isolation,
            },
        )
    )


def _partitions(consumer: Consumer, topic: str) -> int:
    meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S)
    found = meta.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise KafkaUnavailableError(f"the checker cannot see topic {topic}")
    return len(found.partitions)


def _fatal(err: KafkaError) -> bool:
    # A broker that is down or paused is what the campaign does on purpose:
    # only errors the client cannot get over end the read.
    return bool(err.fatal()) or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


class OutputReader:
    """Every committed record of `topic` from its start, with when it was first seen.

    Seen in campaigns: after some broker restarts a read_committed librdkafka
    consumer stopped returning records for good while the partitions' last
    stable offsets moved on (a fresh consumer read them at once). So a reader
    whose position has stood behind the last stable offset for `STALL_S` is
    replaced by a new consumer at the same positions (`reconnects` counts it).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        started: float,
        key_of: Callable[[bytes | None, bytes | None], bytes | None] = lambda key, _value: key,
    ) -> None:
        self.bootstrap = bootstrap
        #: The key an output belongs to in `latest` (from its Kafka key and value).
        self.key_of = key_of
        self.topic = topic
        self.started = started
        self.records: list[Output] = []
        #: The last value seen per key: the job caught up when these are the finals.
        self.latest: dict[bytes | None, bytes | None] = {}
        #: How often the consumer was replaced because it stalled.
        self.reconnects = 0
        self._consumer = _consumer(bootstrap, "read_committed")
        self._partitions = _partitions(self._consumer, topic)
        self._next = dict.fromkeys(range(self._partitions), 0)
        self._consumer.assign([TopicPartition(topic, p, 0) for p in self._next])
        self._progress = time.monotonic()

    def poll(self, timeout: float) -> int:
        """Take what became visible (waiting up to `timeout`); the number of records."""
        got = 0
        for msg in self._consumer.consume(5000, timeout):
            err = msg.error()
            if err is not None:
                if _fatal(err):
                    raise KafkaUnavailableError(f"the checker cannot read {self.topic}: {err}")
                continue
            seen = time.monotonic() - self.started
            key, value = msg.key(), msg.value()
            p, offset = msg.partition() or 0, msg.offset() or 0
            self.records.append(Output(p, offset, key, value, seen))
            self.latest[self.key_of(key, value)] = value
            self._next[p] = offset + 1
            got += 1
        now = time.monotonic()
        if got:
            self._progress = now
        elif now - self._progress >= STALL_S:
            self._progress = now
            self._unstall()
        return got

    def _unstall(self) -> None:
        """Replace the consumer if a new one finds committed records it does not return.

        A probe, not the consumer's own position: the stuck consumers met in
        campaigns reported positions that looked current.
        """
        probe = _consumer(self.bootstrap, "read_committed")
        try:
            probe.assign([TopicPartition(self.topic, p, n) for p, n in self._next.items()])
            found = any(m.error() is None for m in probe.consume(1, PROBE_S))
        except KafkaException:
            return  # the broker is down or paused: nothing to tell yet
        finally:
            probe.close()
        if not found:
            return
        self._consumer.close()
        self._consumer = _consumer(self.bootstrap, "read_committed")
        self._consumer.assign([TopicPartition(self.topic, p, n) for p, n in self._next.items()])
        self.reconnects += 1

    def close(self) -> None:
        self._consumer.close()


def read_to_end(
    bootstrap: str, topic: str, isolation: str
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every record of `topic` up to its end now.

    The end is the last stable offset under read_committed (the high watermark
    otherwise); reading stops when every partition's position reaches it.
    """
    consumer = _consumer(bootstrap, isolation)
    try:
        n = _partitions(consumer, topic)
        ends = {
            p: consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=READ_TIMEOUT_S, cached=False
            )[1]
            for p in range(n)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                raise KafkaUnavailableError(f"the checker could not read {topic} to its end")
            for msg in consumer.consume(5000, 0.5):
                err = msg.error()
                if err is not None:
                    if _fatal(err):
                        raise KafkaUnavailableError(f"the checker cannot read {topic}: {err}")
                    continue
                out.append((msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value()))
            # Position, not the last offset: transaction markers and aborted records
            # take offsets a read_committed consumer never returns.
            for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= ends[tp.partition]:
                    pending.discard(tp.partition)
        out.sort(key=lambda r: (r[0], r[1]))
        return out
    finally:
        consumer.close()


def read_input(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of `topic`, partition by partition, up to the high watermarks now."""
    return [value or b"" for _, _, _, value in read_to_end(bootstrap, topic, "read_uncommitted")]


def final_outputs(bootstrap: str, live: OutputReader, now: float) -> tuple[list[Output], int]:
    """Every committed output now, read afresh, with the times `live` first saw them.

    The verdict does not rest on one consumer having kept up: records the live
    reader never got (it lagged, or a client got stuck) are taken from this read,
    seen at `now`; the second value counts them.
    """
    seen = {(o.partition, o.offset): o.seen_at for o in live.records}
    out = []
    missed = 0
    for p, offset, key, value in read_to_end(bootstrap, live.topic, "read_committed"):
        at = seen.get((p, offset))
        if at is None:
            missed += 1
        out.append(Output(p, offset, key, value, now if at is None else at))
    return out, missed
