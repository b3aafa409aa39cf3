"""Flow control's I/O: readers report their channel positions, writers probe them and pause.

The decision is `kstream.protocol.flow.FlowGate`'s; this module feeds it and
carries out what it says (see :ref:`flow-control-design`):

* every subtask that reads channels commits its consumer's positions to its
  own consumer group, asynchronously, every `REPORT_INTERVAL_S` while they
  move, every `IDLE_INTERVAL_S` while they stand still (`PositionReport`): no
  cost per record, one commit request per interval at most;
* every subtask that writes channels runs a `ChannelProbe` thread that, every
  `PROBE_INTERVAL_S`, asks the cluster for the end offsets of the channels
  it writes (one ListOffsets request) and for the positions their readers
  committed (one OffsetFetch per downstream subtask, sent by a consumer of
  that subtask's group that never joins it, not by the admin client: see
  `ChannelProbe`), off the processing thread; while its last answer found
  every channel drained and nothing more was delivered since, it asks nothing
  and repeats that answer (`kstream.protocol.flow.still_drained`);
* the writer counts the channel records it hands to its producer, per
  channel, and those the broker acknowledged (`FlowControl.counted`: one
  dictionary update and one delivery callback per channel record, which
  carries up to 500 stream records); a probe takes the acknowledged counts
  as they are when it begins, since only those records are surely in the end
  offsets it reads (see `kstream.protocol.flow`). `FlowControl.step` serves the
  producer's delivery callbacks, so the counts move wherever the subtask runs;
* `FlowControl.step`, called once per poll of the subtask, hands the newest
  answer, its counts and the time to the gate. A pause is kept by not reading
  the consumer (`FlowControl.consume` returns nothing), not by
  `Consumer.pause`: librdkafka (2.16) drops a paused partition's prefetched
  records and fetches it again only on its next fetch round, up to a second
  after `resume` (measured: 0.5-0.9 s to the first record, whatever the pause
  lasted), which left a writer idle most of the time. Unread, the consumer
  stops fetching by itself once its prefetch queue is full
  (`queued.max.messages.kbytes`), so the backlog still stays in the topic. Only
  a subtask that must read some inputs while paused (a loop head's loop
  channels) pauses its consumer's other partitions. The subtask's loop goes on
  while paused, so triggers, control messages and barriers are served and
  checkpoints proceed;
* `FlowControl.consume` reads at most what the gate's credit allows
  (`FlowGate.read_limit`) and counts what it read, for the gate's fan-out; a
  channel reader counts instead only what went through its chain
  (`FlowControl.processed`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, assert_never, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

# Public, but missing from the type stubs' exports.
from confluent_kafka.admin import OffsetSpec as OffsetSpec  # type: ignore[attr-defined]

from kstream.dataflow.graph import Node, children
from kstream.dataflow.plan import Plan, TaskSpec, input_topic
from kstream.protocol.barrier import Channel
from kstream.protocol.flow import (
    FlowConfig,
    FlowGate,
    Opened,
    Pause,
    Probed,
    Resume,
    Tick,
    Wrote,
    still_drained,
)
from kstream.protocol.names import task_group
from kstream.runtime.kafka import client_config

__all__ = [
    "PROBE_INTERVAL_S",
    "REPORT_INTERVAL_S",
    "ChannelProbe",
    "FlowControl",
    "PositionReport",
    "written_channels",
]

log = logging.getLogger("kstream.flow")

#: How often a reader commits its channel positions: often enough that a
#: writer waits about one interval to learn it may go on, rarely enough that
#: the commits cost nothing next to the records read meanwhile.
REPORT_INTERVAL_S = 0.1
#: How often a writer asks for its channels' lag (in a thread of its own), also
#: while it is idle: the answer is what tells it its reader made room.
PROBE_INTERVAL_S = 0.1
#: How often a reader whose positions did not move reports them again (a lost
#: asynchronous commit is repaired within this).
IDLE_INTERVAL_S = 1.0
#: Bound on one probe's requests; a probe that takes longer is skipped.
PROBE_TIMEOUT_S = 5.0
#: Probes failing for this long replace their clients (`ChannelProbe._rebuild`).
REBUILD_AFTER_S = 5.0


def written_channels(plan: Plan, spec: TaskSpec) -> dict[Channel, str]:
    """The channels subtask `spec` writes, each with the consumer group of its reader.

    Loop channels (feedback edges) are left out: their reader, a loop head,
    never pauses them, and a writer waiting on one would wait on its own
    loop (:ref:`barriers-cycles`).
    """
    out: dict[Channel, str] = {}
    for node in _edges(plan.stage(spec).root):
        target = node.edge_to
        assert target is not None
        inp = target.inputs[node.edge_input]
        if inp.loop:
            continue
        d = plan.parallelism[target.index]
        topic = input_topic(plan.job.name, target.index, inp)
        for j in range(d):
            reader = TaskSpec(target.index, j, d).id
            out[Channel(topic, spec.index * d + j)] = task_group(plan.job.name, reader)
    return out


def _edges(node: Node) -> Iterator[Node]:
    if node.kind == "edge":
        yield node
    for c in children(node):
        yield from _edges(c)


class PositionReport:
    """Commits a reader's consumer positions every `REPORT_INTERVAL_S`, asynchronously.

    The positions are the next offsets the subtask will process. A channel
    held for an alignment counts from its resume offset (`step`'s `held`),
    not from the consumer's position: the records after its barrier that the
    reader fetched are held (or dropped, and read again) until the alignment
    ends, and counting them as processed let their writer fill the channel a second time
    meanwhile (a channel bounded at 10 was seen at 34 in a CI run). Only a
    writer that passed the barrier waits on a held channel, so the alignment
    never waits on that writer. The positions are for flow control only;
    restores use the snapshots' offsets, never the group's.

    The consumer does not know every position: after a seek, librdkafka reports
    none (``OFFSET_INVALID``) until a record of that partition is consumed,
    and a channel sought to its end consumes none until its writer writes
    again. Left out, the group would keep an older position for good and the
    writer would wait on a lag that is not there, while the writer is the one
    that would end the wait: a deadlock. So the subtask tells the report where
    it assigned and sought (`placed`), and the report uses that offset until
    the consumer knows a position of its own.
    """

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer
        self._next = 0.0
        #: The positions last committed, and when they are due again unchanged.
        self._reported: list[tuple[str, int, int]] = []
        self._refresh = 0.0
        #: Where each partition was last assigned or sought: (topic, partition) -> offset.
        self._placed: dict[tuple[str, int], int] = {}

    def placed(self, topic: str, partition: int, offset: int) -> None:
        """The subtask assigned or sought `topic`[`partition`] to `offset`
        (a logical offset, below 0, places nothing)."""
        if offset >= 0:
            self._placed[topic, partition] = offset
        else:
            self._placed.pop((topic, partition), None)

    def positions(self, held: Mapping[Channel, int] | None = None) -> list[TopicPartition]:
        """The position of every assigned partition that has one: held (at its
        resume offset), known or placed."""
        out = []
        for tp in self._consumer.position(self._consumer.assignment()):
            key = (tp.topic, tp.partition)
            resume = (held or {}).get(Channel(tp.topic, tp.partition))
            if resume is not None:
                out.append(TopicPartition(tp.topic, tp.partition, resume))
            elif tp.offset >= 0:
                # The consumer knows it: a seek's offset is stale from now on.
                self._placed.pop(key, None)
                out.append(tp)
            elif key in self._placed:
                out.append(TopicPartition(tp.topic, tp.partition, self._placed[key]))
        return out

    def step(self, now: float, held: Mapping[Channel, int] | None = None) -> None:
        """Commit the positions if due; `held`: the channels held for an
        alignment, with the offsets they will be read again from."""
        if now < self._next:
            return
        self._next = now + REPORT_INTERVAL_S
        known = self.positions(held)
        if not known:
            return
        # Unchanged positions are committed again only every `IDLE_INTERVAL_S`:
        # an idle reader costs the broker a commit per second, not ten.
        report = [(tp.topic, tp.partition, tp.offset) for tp in known]
        if report == self._reported and now < self._refresh:
            return
        self._reported, self._refresh = report, now + IDLE_INTERVAL_S
        try:
            self._consumer.commit(offsets=known, asynchronous=True)
        except KafkaException as exc:
            # A missed report only delays the writer's resume by one interval.
            log.debug("position report failed: %s", exc)


class ChannelProbe:
    """A thread reading the lag inputs of `channels` (channel -> its reader's group).

    The readers' committed positions are fetched by one consumer per group,
    configured with that group but never subscribing (so it never joins the
    group or changes its assignment). Not by the admin client's
    ListConsumerGroupOffsets: librdkafka (2.16 and earlier) dereferences the
    admin client's absent consumer group when an OffsetFetch answer asks for a
    coordinator refresh, which is what a restarted broker answers, and the
    whole process dies of SIGSEGV on its ``rdk:main`` thread (upstream
    confluentinc/librdkafka#5315). A consumer with a group handles the same
    answer. Reading with ``read_uncommitted`` keeps the fetch from waiting on
    offsets pending in a transaction (the readers' reports are plain commits).
    """

    def __init__(
        self,
        bootstrap: str,
        channels: dict[Channel, str],
        delivered: dict[Channel, int] | None = None,
    ) -> None:
        self._channels = channels
        #: The writer's delivered records, read (copied) when a probe begins:
        #: their keys never change.
        self._delivered = delivered if delivered is not None else {}
        self._groups: dict[str, list[Channel]] = {}
        for ch, group in channels.items():
            self._groups.setdefault(group, []).append(ch)
        self._bootstrap = bootstrap
        self._admin, self._readers = self._clients()
        #: The newest answer (replaced whole: readers need no lock).
        self.latest: Probed | None = None
        #: Probe rounds that got no answer (the thread goes on after each).
        self.failures = 0
        #: How often the clients were replaced after failing for `REBUILD_AFTER_S`.
        self.rebuilds = 0
        self._answered = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="channel-probe", daemon=True)
        self._thread.start()

    def _clients(self) -> tuple[AdminClient, dict[str, Consumer]]:
        readers = {
            group: Consumer(
                client_config(
                    self._bootstrap,
                    {
                        "group.id": group,
                        "enable.auto.commit": False,
                        "isolation.level": "read_uncommitted",
                    },
                )
            )
            for group in self._groups
        }
        return AdminClient(client_config(self._bootstrap)), readers

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                latest = self.latest
                if latest is not None and still_drained(latest, self._delivered):
                    # The same answer, as of now, without asking (an idle job's
                    # probes were a third of what it asked the broker).
                    self.latest = dataclasses.replace(latest, at=time.monotonic())
                else:
                    self.latest = self.probe()
                self._answered = time.monotonic()
            except (KafkaException, TimeoutError) as exc:
                # An unanswered round must not end the thread: the gate would go
                # blind for good (it resumes, see `FlowGate`, but never pauses again).
                self.failures += 1
                log.debug("channel probe failed: %r", exc)
                if time.monotonic() - self._answered >= REBUILD_AFTER_S:
                    self._rebuild()
            self._stop.wait(PROBE_INTERVAL_S)

    def _rebuild(self) -> None:
        """Replace the clients: after a broker restart, librdkafka's admin client
        (2.16) answered every ListOffsets with FENCED_LEADER_EPOCH for good,
        keeping the leader epoch it knew; a new client asks afresh."""
        old = self._readers
        self._admin, self._readers = self._clients()
        for consumer in old.values():
            consumer.close()
        self.rebuilds += 1
        self._answered = time.monotonic()  # the next rebuild, if any, after as long again

    def probe(self) -> Probed:
        """One round: end offsets and the readers' positions (raises `KafkaException`,
        or `TimeoutError` when the cluster does not answer in time)."""
        at = time.monotonic()
        # Before the end offsets are asked for: what was delivered by now is in them.
        delivered = dict(self._delivered)
        tps = [TopicPartition(c.topic, c.partition) for c in self._channels]
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in the stubs
        ends = _offsets(
            self._admin.list_offsets(dict.fromkeys(tps, latest), request_timeout=PROBE_TIMEOUT_S)
        )
        # The positions only once the end offsets arrived: a position read later
        # makes a lag smaller, never larger, than what the channel held (the gate
        # adds what was written since the probe began). Asked for together, the
        # end offsets could arrive seconds after the positions (a new client's
        # first request, on a loaded machine): a channel its reader had nearly
        # drained counted as holding all it was ever sent (61 records, not 2).
        positions: dict[Channel, int] = {}
        for group, chans in self._groups.items():
            committed = self._readers[group].committed(
                [TopicPartition(c.topic, c.partition) for c in chans], timeout=PROBE_TIMEOUT_S
            )
            for tp in committed:
                if tp.error is None and tp.offset >= 0:
                    positions[Channel(tp.topic, tp.partition)] = int(tp.offset)
        unknown = [TopicPartition(c.topic, c.partition) for c in ends if c not in positions]
        starts = {}
        if unknown:
            # Readers that have not reported yet (starting): count from each channel's start.
            earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
            starts = _offsets(
                self._admin.list_offsets(
                    dict.fromkeys(unknown, earliest), request_timeout=PROBE_TIMEOUT_S
                )
            )
        return Probed(at, ends, positions, starts, delivered)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(PROBE_TIMEOUT_S * 2)
        if not self._thread.is_alive():
            for consumer in self._readers.values():
                consumer.close()


def _offsets(futures: dict[TopicPartition, Future[Any]]) -> dict[Channel, int]:
    return {
        Channel(tp.topic, tp.partition): int(f.result(PROBE_TIMEOUT_S).offset)
        for tp, f in futures.items()
    }


class FlowControl:
    """Pauses and resumes one subtask's reading as its `FlowGate` says.

    While paused, `consume` reads nothing and the consumer is left as it is
    (see the module's docstring for why it is not `Consumer.pause`d).
    `never_paused` are input partitions a pause leaves alone: a loop head's
    loop channels, which must drain for its own writes (and its loop's) to
    drain. Such a subtask pauses its consumer's other partitions instead, and
    `held` then names the input partitions it holds paused for another reason
    (a blocked channel while aligning): a resume leaves them paused.
    `on_resume` is called after every resume. A subtask that writes no
    channels gets a control that never pauses.
    """

    def __init__(
        self,
        bootstrap: str,
        plan: Plan,
        spec: TaskSpec,
        config: FlowConfig,
        held: Callable[[], set[tuple[str, int]]] = set,
        on_resume: Callable[[], None] = lambda: None,
        never_paused: frozenset[tuple[str, int]] = frozenset(),
    ) -> None:
        self.gate = FlowGate(config)
        self._never_paused = never_paused
        #: A pause stops reading rather than pausing the consumer (see the module's
        #: docstring): possible unless some inputs must be read while paused.
        self._unread = not never_paused
        self._held = held
        self._on_resume = on_resume
        channels = written_channels(plan, spec) if config.enabled else {}
        #: Channel records handed to the producer per channel (`counted`), and
        #: those of them the broker acknowledged.
        self._written = dict.fromkeys(channels, 0)
        self._delivered = dict.fromkeys(channels, 0)
        self._probe = ChannelProbe(bootstrap, channels, self._delivered) if channels else None
        #: The producer `counted` wraps: `step` serves its delivery callbacks.
        self._producer: Producer | None = None
        self._seen: Probed | None = None
        #: Input records read through `consume` (for the gate's fan-out).
        self._read = 0
        #: Times this subtask paused (for tests and statistics).
        self.pauses = 0
        #: Times it resumed because the probe did not answer (`FlowGate` goes blind).
        self.blind_resumes = 0

    @property
    def paused(self) -> bool:
        return self.gate.paused

    def counted(
        self,
        producer: Producer,
        on_failed: Callable[[KafkaError, Message], None] = lambda err, msg: None,
    ) -> Producer:
        """`producer`, counting what it is handed for this subtask's channels and
        what of that was delivered.

        Channel records get a delivery callback of their own, which replaces the
        producer's: `on_failed` receives their failures instead (the worker's
        producer-wide callback, which kills the worker on a lost record).
        `producer` must report every delivery (``delivery.report.only.error``
        off): a gate that never learns of a delivery counts those records as
        still queued, and stays paused once they pass the bound.
        """
        if self._probe is None:
            return producer
        self._producer = producer
        return cast(
            Producer, _CountingProducer(producer, self._written, self._delivered, on_failed)
        )

    def consume(
        self, consumer: Any, limit: int, timeout: float, *, counted: bool = True
    ) -> list[Any]:
        """`consumer.consume`, of at most as many records as the gate allows
        (`FlowGate.read_limit`): what one read makes the subtask write must fit
        below the bound, since the gate can act only between reads.

        The records read count towards the gate's fan-out unless `counted` is
        False: a subtask that drops or skips some of what it reads then tells
        `processed` what it pushed through its chain.
        """
        if self._probe is None:
            return cast(list[Any], consumer.consume(limit, timeout))
        if self._unread and self.gate.paused:
            # Nothing is read; the turn waits as long as an empty read would (the
            # worker's idle wait, 0 while its other subtasks have work).
            if timeout > 0:
                time.sleep(timeout)
            return []
        msgs = cast(list[Any], consumer.consume(self.gate.read_limit(limit), timeout))
        if counted:
            self._read += len(msgs)
        return msgs

    def processed(self, records: int) -> None:
        """`records` input records of the last read went through the chain (for a
        subtask that reads with ``consume(counted=False)``).

        Only those can make channel records. Counting the others too (barriers,
        records dropped while aligning, stale copies skipped after a seek) made
        a turn that read many and wrote one channel record look like a fan-out
        near 0, and the next read, sized by it, overfilled the channels (a
        middle stage bounded at 10 channel records was seen at 102).
        """
        self._read += records

    def step(self, now: float, consumer: Any) -> None:
        """Apply the newest probe answer, the counts and the time `now` (monotonic)
        to `consumer`, the subtask's."""
        if self._probe is None:
            return
        if self._producer is not None:
            self._producer.poll(0)  # the delivery callbacks that count
        actions = self.gate.handle(Opened(now)) if self.gate.opened_at is None else []
        actions += self.gate.handle(Tick(now))
        latest = self._probe.latest
        if latest is not None and latest is not self._seen:
            self._seen = latest
            actions += self.gate.handle(latest)
        actions += self.gate.handle(Wrote(self._written, self._read))
        for action in actions:
            match action:
                case Pause():
                    self.pauses += 1
                    log.debug("pausing: %s holds %d records", action.channel or "?", action.lag)
                    if self._unread:
                        continue
                    consumer.pause(
                        [
                            tp
                            for tp in consumer.assignment()
                            if (tp.topic, tp.partition) not in self._never_paused
                        ]
                    )
                case Resume():
                    if self.gate.blind:
                        self.blind_resumes += 1
                        log.warning(
                            "flow control: the channel probe has not answered for %.0f s; "
                            "reading on without knowing what the channels hold",
                            self.gate.config.stale_after_s,
                        )
                    if self._unread:
                        self._on_resume()
                        continue
                    held = self._held()
                    free = [
                        tp for tp in consumer.assignment() if (tp.topic, tp.partition) not in held
                    ]
                    if free:
                        consumer.resume(free)
                    self._on_resume()
                case _:
                    assert_never(action)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()


class _CountingProducer:
    """A producer's stand-in for channel writers: counts each record produced, per
    channel, and each delivered."""

    def __init__(
        self,
        producer: Producer,
        counts: dict[Channel, int],
        delivered: dict[Channel, int],
        on_failed: Callable[[KafkaError, Message], None],
    ) -> None:
        self._producer = producer
        self._counts = counts
        self._delivered = delivered
        self._on_failed = on_failed

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
        # Positional as `kstream.runtime.kafka.produce` calls it: value, key, partition.
        partition = kwargs.get("partition", args[2] if len(args) > 2 else -1)
        ch = Channel(topic, partition)
        if ch not in self._counts:
            self._producer.produce(topic, *args, **kwargs)
            return
        kwargs["on_delivery"] = self._on_delivery
        self._producer.produce(topic, *args, **kwargs)
        self._counts[ch] += 1

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._on_failed(err, msg)
            return
        ch = Channel(cast(str, msg.topic()), cast(int, msg.partition()))
        self._delivered[ch] += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)
