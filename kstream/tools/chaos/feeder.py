"""The campaign's input producer: writes the input at its rate and outlives a stuck client.

Seen in long campaigns: after a broker bounce amid kills and pauses, the
campaign's long-lived idempotent producer kept its records queued for good,
with no connection to the broker at all, while fresh clients (and the job's
own) worked. The campaign then had no input for the rest of its run, and its
drain failed on deliveries that never came.

`InputFeeder` tracks which records are acknowledged. When some are pending
and none was acknowledged for `STALL_S` while a fresh client finds every
partition of the topic led by a broker, the producer is abandoned (its queue
purged) and a new one writes the pending records again, in order.

What that costs: a record the old producer had handed over before it stuck
may be in the log twice, and one it delivers late may land after later
records. The campaign's judge reads the input back as it ended up
(`kstream.tools.chaos.reader.read_input`), so the expected output is that of
the input the job saw: duplicates or reordering in the input are the
producer's, never counted against the job.
"""

from __future__ import annotations

import contextlib
import time

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from kstream.errors import KafkaUnavailableError
from kstream.infra.client_settings import client_config
from kstream.runtime.kafka import IDEMPOTENT
from kstream.runtime.kafka import produce as produce_one

__all__ = ["InputFeeder"]

#: No acknowledgement for this long with records pending: check whether the
#: producer is stuck. Longer than a broker pause or bounce of the campaign (20 s),
#: so a producer that only waits for the broker to come back is left alone.
STALL_S = 45.0
#: How long the check waits for the topic's metadata from a fresh client.
PROBE_S = 5.0


class InputFeeder:
    """Writes `values` to `topic`, value i to partition i % `partitions`, `rate` per
    second from the first `feed`; replaces its producer when it is stuck.

    `feed()` is called on every round of the campaign and never blocks for
    long; `done` says when every value is acknowledged.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        values: list[bytes],
        partitions: int,
        rate: float,
        stall_s: float = STALL_S,
    ) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._values = values
        self._partitions = partitions
        self._rate = rate
        self._stall_s = stall_s
        self._sent = 0
        self._started: float | None = None
        #: Indices handed to the current producer and not acknowledged yet, in order.
        self._pending: dict[int, None] = {}
        self._progress = time.monotonic()
        #: Producers given up on: kept referenced, since destroying a stuck
        #: librdkafka client can block on its threads.
        self._abandoned: list[Producer] = []
        self._producer = self._new_producer()
        #: How often the producer was replaced because it was stuck.
        self.replacements = 0

    @property
    def sent(self) -> int:
        """How many values were handed to a producer so far."""
        return self._sent

    @property
    def pending(self) -> int:
        """Values handed over and not acknowledged yet."""
        return len(self._pending)

    @property
    def done(self) -> bool:
        """Every value was written and acknowledged."""
        return self._sent == len(self._values) and not self._pending

    def feed(self) -> None:
        """Write the values due by now; serve acknowledgements; replace a stuck producer."""
        now = time.monotonic()
        if self._started is None:
            self._started = now
        due = min(len(self._values), int((now - self._started) * self._rate) + 1)
        for i in range(self._sent, due):
            self._write(i)
        self._sent = max(self._sent, due)
        self._producer.poll(0)
        if not self._pending:
            self._progress = now
        elif now - self._progress >= self._stall_s:
            self._progress = now
            if self._broker_answers():
                self._replace()

    def close(self) -> None:
        """Hand back what is still queued (nothing, once `done`)."""
        self._producer.flush(0)

    # -- inside ---------------------------------------------------------------

    def _new_producer(self) -> Producer:
        return Producer(client_config(self._bootstrap, IDEMPOTENT))

    def _write(self, i: int) -> None:
        self._pending[i] = None
        producer = self._producer

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if producer is not self._producer:
                return  # an abandoned producer's late report: its records were re-sent
            if err is None:
                self._pending.pop(i, None)
                self._progress = time.monotonic()
            elif err.fatal():
                raise KafkaUnavailableError(f"the campaign cannot write its input: {err}")
            else:
                # A record that timed out in the queue: hand it over again (it may
                # now follow later records; the judge reads the input as it is).
                self._write(i)

        produce_one(
            producer,
            self._topic,
            self._values[i],
            None,
            i % self._partitions,
            kind="campaign input",
            on_delivery=delivered,
        )

    def _broker_answers(self) -> bool:
        """Whether a fresh client finds a leader for every partition of the topic."""
        probe = Producer(client_config(self._bootstrap, {}))
        try:
            meta = probe.list_topics(self._topic, timeout=PROBE_S)
        except KafkaException:
            return False  # the broker is down or paused: waiting is right
        finally:
            probe.flush(0)
        topic = meta.topics.get(self._topic)
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        return all(p.leader >= 0 for p in topic.partitions.values())

    def _replace(self) -> None:
        old = self._producer
        # A producer in a fatal state refuses even this: abandoning it is all that is left.
        with contextlib.suppress(KafkaException):
            old.purge(in_queue=True, in_flight=True, blocking=False)
        self._abandoned.append(old)
        self._producer = self._new_producer()
        self.replacements += 1
        again = list(self._pending)
        self._pending.clear()
        for i in again:
            self._write(i)
