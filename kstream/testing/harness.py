"""Unit-testing a job without a broker: the real operator chains, fed from lists.

    from kstream.testing import Record, TestRun, run_job

    outputs = run_job(job, {"orders": [Record({"id": 1}, key="a", timestamp=1_000)]})
    outputs["totals"]                 # list[Record], by sink topic

    with TestRun(job, params={"input": "orders"}) as run:
        run.send("orders", records)   # one partition per source, in order
        run.advance_watermark(5_000)  # every source's watermark is at least 5000
        run.advance_processing_time(60_000)  # fires processing-time timers
        run.output("totals"); run.dead_letters()

What runs is what a job runs: each stage's operator chain compiled by
`kstream.runtime.worker.chain`, its keyed state and timers in RocksDB (the real
`StateStore`, in a temporary directory), the real watermark classes, and the
job's error policy (`RecordErrors`). What is not Kafka is replaced by memory:

* **Sources** are fed from lists (`send`). A `Record`'s value is written with
  the source's serde and read back with it (bytes are taken as written), so a
  value the source cannot decode fails as it would in a job. Event time comes
  from `Record.timestamp` (``timestamps="kafka"``; None is a record without
  one) or from the source's function of the value. A partition's first record
  is judged against no wall clock (there is none here).
* **Stage-to-stage records** go through the real `ChannelWriter` and are read
  back as a channel subtask reads them, so every record crosses the job's
  channel serde: one the serde cannot carry is refused as in a job.
* **Sinks** are replaced by in-memory writers collecting `Record` values per
  topic (a sink without topics under its name). A `KafkaSink`'s results are
  written with its key and value serdes and read back with them (a 2-tuple
  is a key and a value), as a consumer of the topic would see them; the
  timestamp is the result's event time on a stage with event time, else None.
  Dead letters are collected under the job's dead-letter topic.

Not covered, on purpose: checkpoints, recovery and rollbacks; parallelism above
one (each stage runs one subtask, reading one partition per source); lineage
headers; the record size limits of topics. The e2e suite covers those on a
real cluster. Processing time starts at 0 and moves only by
`TestRun.advance_processing_time` (``ctx.now()`` reads it): processing-time
timers never fire by themselves, and idleness is measured on that clock.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kstream.connectors.kafka import KafkaSink
from kstream.dataflow import snapshot_request
from kstream.dataflow.graph import Node, Stage
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Sink
from kstream.dataflow.plan import input_topic
from kstream.dataflow.serde import Serde, serde
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import ConfigurationError, DecodeError, TimestampError
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES, Headers
from kstream.protocol.names import dead_letter_topic
from kstream.protocol.watermarks import (
    MAX_TIMESTAMP,
    MIN_WATERMARK,
    InputWatermarks,
    SourceWatermarks,
    Unusable,
)
from kstream.runtime.channels.format import (
    RECORD,
    TIMED,
    BatchFormat,
    decode_header,
    decode_timed,
)
from kstream.runtime.channels.writer import ChannelWriter
from kstream.runtime.state.element import ElementContext
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_encoder
from kstream.runtime.worker.chain import (
    TimerOperator,
    compile_chain,
    fire_due,
    has_process,
    input_pushes,
)
from kstream.runtime.worker.dead_letters import RecordErrors

__all__ = ["Record", "TestRun", "run_job"]

_STR = serde("str")


@dataclass(frozen=True, slots=True)
class Record:
    """One record into a source or out of a sink (or a dead letter).

    Into a source: `value` as the source's serde decodes it (or its bytes),
    `key` (only dead letters keep it) and `timestamp` (ms; the event time of a
    source with ``timestamps="kafka"``). Out of a `KafkaSink`: its key and
    value written with the sink's serdes and read back with them (a result
    that is a 2-tuple is a key and a value), as a consumer of the topic sees
    them; out of any other sink: the result as the sink got it. `timestamp` is
    then the result's event time on a stage with event time, else None. A dead
    letter holds the failed record's bytes, with why in `headers` (`header`).
    """

    value: Any
    key: Any = None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()

    def header(self, name: str) -> bytes | None:
        """The value of header `name` (the first one), or None."""
        return next((v for k, v in self.headers if k == name), None)


class _Subtask:
    """One stage's only subtask: its chain, state, timers, watermarks and error policy."""

    def __init__(self, run: TestRun, stage: Stage) -> None:
        job = run.job
        self.stage = stage
        self.id = f"s{stage.index}-0"
        self.keyed = stage.keyed
        self.element = ElementContext(stage.timed, clock=run.processing_time)
        self.errors = RecordErrors(
            job.on_error, job.name, self.id, None, DEFAULT_PRODUCER_BYTES, out=run._dead_letter
        )
        self.state: StateStore | None = None
        if has_process(stage.root):
            self.state = StateStore(run._dir / self.id / "db", job.state_serde, job.max_parallelism)
        self.format = BatchFormat(job.channel_serde)
        self.writers: list[ChannelWriter] = []
        self.timer_operators: list[TimerOperator] = []
        self._run = run
        #: Channel records written to this stage and not read yet: (topic, offset, value).
        self.inbox: list[tuple[str, int, bytes]] = []
        self.push: Callable[..., None] = compile_chain(
            stage.root,
            stage_index=stage.index,
            state=self.state,
            open_sink=self._open_sink,
            open_edge=self._open_edge,
            element=self.element,
            timer_operators=self.timer_operators,
            key_bytes=key_encoder(KEY_FORMAT),
        )
        topics = [input_topic(job.name, stage.index, i) for i in stage.inputs]
        self.pushes = dict(zip(topics, input_pushes(stage, self.push), strict=True))
        self.input_watermarks: InputWatermarks | None = None
        if stage.timed and topics:
            self.input_watermarks = InputWatermarks(topics)
        self.source_watermarks: SourceWatermarks | None = None
        self.offset = 0
        if stage.source is not None:
            self.serde: Serde = stage.source.serde
            if stage.timed:
                config = stage.source.watermark_config()
                self.source_watermarks = SourceWatermarks(config, [0], run.processing_time())

    # -- the chain's ends ---------------------------------------------------

    def _open_sink(self, node: Node) -> Callable[[Any], None]:
        assert node.sink is not None
        sink = node.sink
        kept = self._run._outputs.setdefault(_topic_of(sink), [])
        element = self.element
        record = _kafka_records(sink) if isinstance(sink, KafkaSink) else Record

        def write(value: Any) -> None:
            kept.append(record(value, timestamp=element.timestamp if element.timed else None))

        return write

    def _open_edge(self, node: Node) -> Callable[[Any], None]:
        assert node.edge_to is not None
        target = node.edge_to
        inp = target.inputs[node.edge_input]
        topic = input_topic(self._run.job.name, target.index, inp)
        run = self._run

        def out(_partition: int, value: bytes) -> None:
            run._deliver(target.index, topic, value)

        writer = ChannelWriter(
            None,
            topic,
            0,
            1,
            0,
            inp.key_fn,
            on_too_large=self.errors.on_channel_record_too_large,
            element=self.element if self.element.timed else None,
            batch_format=self.format,
            on_unencodable=self.errors.on_channel_record_unencodable,
            key_bytes=key_encoder(KEY_FORMAT),
            out=out,
        )
        self.writers.append(writer)
        return writer.send

    # -- input ----------------------------------------------------------------

    def read_source(self, records: Iterable[Record], forced: int) -> None:
        """Push source records through the chain, as one batch of partition 0."""
        source = self.stage.source
        assert source is not None
        topic, loads, push, element = source.topic, self.serde.loads, self.push, self.element
        sw, now = self.source_watermarks, self._run.processing_time()
        timestamps = source.timestamps
        served = snapshot_request.server.set(_no_snapshots)
        try:
            for record in records:
                value, key = _source_bytes(self.serde, source.topic, record), _key_bytes(record.key)
                offset, self.offset = self.offset, self.offset + 1
                try:
                    decoded = loads(value)
                    if sw is not None:
                        if timestamps == "kafka":
                            at: object = record.timestamp
                        else:
                            assert callable(timestamps)
                            at = timestamps(decoded)
                        verdict = sw.observe(0, at, now)
                        if isinstance(verdict, Unusable):
                            raise TimestampError(verdict.reason)
                        element.timestamp = verdict.timestamp
                        # After `advance_watermark`, a record below it is late, as one
                        # behind its partition's watermark is in a job.
                        element.stamp = max(verdict.partition_watermark, forced)
                    push(decoded)
                except Exception as exc:
                    self.errors.record_failed(exc, topic, 0, offset, key, value)
        finally:
            snapshot_request.server.reset(served)
        self.tick(forced)

    def tick(self, forced: int) -> None:
        """The source's watermark and idleness after a batch (or a clock move)."""
        sw = self.source_watermarks
        if sw is not None:
            sw.tick(self._run.processing_time())
            self.element.watermark = max(sw.watermark, forced)
            self.element.idle = sw.idle

    def read_channels(self) -> None:
        """Read every channel record waiting, in order, as a channel subtask reads them."""
        waiting, self.inbox = self.inbox, []
        for topic, offset, value in waiting:
            kind, _ = decode_header(value)
            if kind == RECORD:
                self._record(topic, offset, value)
            elif kind == TIMED:
                self._timed(topic, offset, value)

    def _record(self, topic: str, offset: int, value: bytes) -> None:
        push, keyed = self.pushes[topic], self.keyed
        try:
            items = self.format.decode(value, keyed)
        except DecodeError as exc:
            self.errors.record_failed(exc, topic, 0, offset, None, value)
            return
        for item in items:
            try:
                if keyed:
                    push(*item)
                else:
                    push(item)
            except Exception as exc:
                self.errors.record_failed(exc, topic, 0, offset, None, value, item)

    def _timed(self, topic: str, offset: int, value: bytes) -> None:
        try:
            timed = decode_timed(value, self.format, self.keyed)
        except DecodeError as exc:
            self.errors.record_failed(exc, topic, 0, offset, None, value)
            return
        push, element, stamps = self.pushes[topic], self.element, timed.stamps
        for i, item in enumerate(timed.items):
            element.timestamp, element.stamp = stamps[2 * i], stamps[2 * i + 1]
            try:
                if self.keyed:
                    push(*item)
                else:
                    push(item)
            except Exception as exc:
                self.errors.record_failed(exc, topic, 0, offset, None, value, item)
        iw = self.input_watermarks
        assert iw is not None
        iw.observe(topic, timed.watermark, timed.idle)
        element.watermark, element.idle = iw.watermark, iw.idle
        self.fire(TimerDomain.EVENT, iw.watermark)

    def fire(self, domain: TimerDomain, time: int) -> None:
        """Fire the timers of `domain` due at `time`; ``on_timer`` errors go to the policy."""
        if not self.timer_operators:
            return
        name = domain.name.lower()

        def failed(exc: Exception, key: Any, ts: int) -> None:
            self.errors.timer_failed(exc, name, key, ts)

        fire_due(self.timer_operators, domain, time, failed)

    def flush(self) -> None:
        """After a batch: send the channel batches, write state changes to RocksDB."""
        for writer in self.writers:
            writer.flush()
        if self.state is not None:
            self.state.flush()

    def close(self) -> None:
        if self.state is not None:
            self.state.close()


class TestRun:
    """A job run step by step in this process, without a broker (see the module docstring).

    `job` is a `Job` or a job spec (a function of `params` returning one, as
    ``kstream run`` takes). Each step (`send`, `advance_watermark`,
    `advance_processing_time`) runs until every record it caused went through
    every stage, so outputs can be checked right after it. An exception the
    job's error policy does not absorb (``on_error="fail"``: `JobFailedError`)
    leaves the step, as it stops a job. Use it as a context manager, or call
    `close`: the state directory is removed then.

    No checkpoints, recovery or parallelism: each stage runs one subtask.
    """

    __test__ = False  # a class named Test*, not a test: pytest must not collect it

    def __init__(
        self, job: Job | Callable[[dict[str, str]], Job], params: Mapping[str, str] | None = None
    ) -> None:
        if isinstance(job, Job):
            if params is not None:
                raise ConfigurationError("params are for a job spec (a function), not a Job")
            self.job = job
        else:
            self.job = job(dict(params or {}))
        self.job.validate()
        self._now = 0
        self._forced = MIN_WATERMARK
        self._dir = Path(tempfile.mkdtemp(prefix=f"kstream-test-{self.job.name}-"))
        self._outputs: dict[str, list[Record]] = {}
        self._dead = dead_letter_topic(self.job.name)
        self._subtasks: list[_Subtask] = []
        #: Channel records written so far, per channel topic (their offsets).
        self._written: dict[str, int] = {}
        try:
            self._subtasks = [_Subtask(self, stage) for stage in self.job.stages]
        except BaseException:
            self.close()
            raise
        self._outputs.setdefault(self._dead, [])

    def __enter__(self) -> TestRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def processing_time(self) -> int:
        """Processing time now (ms): 0 at the start, moved by `advance_processing_time`."""
        return self._now

    def send(self, topic: str, records: Iterable[Record]) -> None:
        """Feed `records` to every source reading `topic`, in order, as one batch."""
        sources = [s for s in self._subtasks if s.stage.source is not None]
        reading = [s for s in sources if s.stage.source and s.stage.source.topic == topic]
        if not reading:
            topics = sorted({s.stage.source.topic for s in sources if s.stage.source})
            raise ConfigurationError(
                f"no source of job {self.job.name} reads {topic!r} (it reads {topics})"
            )
        batch = list(records)
        for subtask in reading:
            subtask.read_source(batch, self._forced)
            subtask.flush()
        self._drain()

    def advance_watermark(self, to: int) -> None:
        """From now on every source's watermark is at least `to` (ms): windows and
        event-time timers up to it fire, and later records below it are late.

        Sources without event time ignore it (so does a job without any).
        """
        self._forced = max(self._forced, to)
        for subtask in self._subtasks:
            if subtask.source_watermarks is not None:
                subtask.tick(self._forced)
                # The source speaks for its partition: an idle one would be left out.
                subtask.element.idle = False
                subtask.flush()
        self._drain()

    def advance_processing_time(self, to: int) -> None:
        """Move processing time to `to` (ms; never back): processing-time timers due
        fire, and sources silent for their idle timeout turn idle."""
        if to < self._now:
            raise ConfigurationError(f"processing time moves forward: {to} < {self._now}")
        self._now = to
        for subtask in self._subtasks:
            subtask.tick(self._forced)
            subtask.fire(TimerDomain.PROCESSING, to)
            subtask.flush()
        self._drain()

    def output(self, topic: str) -> list[Record]:
        """What the job's sinks wrote to `topic` so far, in order (a copy)."""
        if topic not in self._outputs:
            raise ConfigurationError(
                f"job {self.job.name} writes no topic {topic!r} (it writes {sorted(self._outputs)})"
            )
        return list(self._outputs[topic])

    def outputs(self) -> dict[str, list[Record]]:
        """Every sink topic's output so far (and the dead-letter topic's), by topic."""
        return {topic: list(kept) for topic, kept in self._outputs.items()}

    def dead_letters(self) -> list[Record]:
        """The records the job's error policy sent to its dead-letter topic so far."""
        return list(self._outputs[self._dead])

    def close(self) -> None:
        """Close the state stores and remove their directory."""
        for subtask in self._subtasks:
            subtask.close()
        self._subtasks = []
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- between stages ---------------------------------------------------------

    def _deliver(self, stage: int, topic: str, value: bytes) -> None:
        offset = self._written.get(topic, 0)
        self._written[topic] = offset + 1
        self._subtasks[stage].inbox.append((topic, offset, value))

    def _drain(self) -> None:
        """Read channel records until none waits (a loop's feedback included)."""
        while any(s.inbox for s in self._subtasks):
            for subtask in self._subtasks:
                if subtask.inbox:
                    subtask.read_channels()
                    subtask.flush()

    def _dead_letter(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers
    ) -> None:
        kept = tuple(
            (name, v if isinstance(v, bytes) else (v or "").encode()) for name, v in headers
        )
        self._outputs.setdefault(topic, []).append(Record(value, key=key, headers=kept))


def run_job(
    job: Job | Callable[[dict[str, str]], Job],
    inputs: Mapping[str, Iterable[Record]],
    params: Mapping[str, str] | None = None,
) -> dict[str, list[Record]]:
    """Run `job` on `inputs` (per source topic, in order) and return its outputs by topic.

    Sends every topic's records (in the order of `inputs`), then advances the
    watermark to the end of time, so every window and event-time timer fires;
    processing-time timers do not (use `TestRun`). See `TestRun` for what runs.
    """
    with TestRun(job, params) as run:
        for topic, records in inputs.items():
            run.send(topic, records)
        run.advance_watermark(MAX_TIMESTAMP)
        return run.outputs()


def _topic_of(sink: Sink) -> str:
    """Where a sink's results are collected: its (first) topic, else its name."""
    topics = sink.topics()
    return topics[0] if topics else sink.name


def _kafka_records(sink: KafkaSink) -> Callable[..., Record]:
    """``record(result, timestamp=...)``: a `KafkaSink` result as a consumer reading
    with the sink's serdes sees it."""
    key_serde, value_serde = serde(sink.key_serde), serde(sink.value_serde)

    def record(value: Any, timestamp: int | None) -> Record:
        if isinstance(value, tuple) and len(value) == 2:
            key, value = value
        else:
            key = None
        kdata = None if key is None else key_serde.dumps(key)
        data = value_serde.dumps(value)
        return Record(
            value_serde.loads(data),
            key=None if kdata is None else key_serde.loads(kdata),
            timestamp=timestamp,
        )

    return record


def _source_bytes(source_serde: Serde, topic: str, record: Record) -> bytes | None:
    """A source record's value as its topic would hold it: bytes as given, else
    written with the source's serde."""
    if not isinstance(record, Record):
        raise ConfigurationError(f"send() takes kstream.testing.Record values, got {record!r}")
    value = record.value
    if value is None or isinstance(value, bytes):
        return value
    try:
        return source_serde.dumps(value)
    except Exception as exc:
        raise ConfigurationError(
            f"{value!r} cannot be written to {topic} with the source's serde "
            f"{source_serde.name}: {exc} (give bytes, or a value it writes)"
        ) from exc


def _key_bytes(key: Any) -> bytes | None:
    return None if key is None else _STR.dumps(key)


def _no_snapshots() -> None:
    """`request_snapshot()` in a source's stage: accepted; a test run takes no snapshots."""
