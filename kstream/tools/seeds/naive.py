"""Seed 000's naive scheme, run for real: each process records itself on its own clock.

Without markers, each of p and q records, at seeded ticks of its own clock
(`recording_ticks`), its local state and its input channel as it sees it at
that moment, and nothing else coordinates the two:

* its state: whether it holds the token (s1) or not (s0), and the token's hop;
* its input channel (q→p for p, p→q for q), by offsets: how many of the
  channel's messages it has consumed, and the channel topic's end offset in
  Kafka at that moment (what had reached its queue);
* how many messages it sent on its output channel, and its pid.

`Recorder` does this inside the process's operator: `naive_token_ring` is the
token ring of `kstream.examples.seed_ring` built from the example's own
operators, each process wrapped to tell its recorder what it did. It stores
each `LocalRecord` in the run's checkpoint storage
(`kstream.runtime.checkpoint.storage.LocalCheckpointStorage.root`, under
``naive/<process>/``), next to where the real snapshots go.

`compose` pairs the i-th record of p with the i-th record of q, as the naive
scheme does: a channel's state is what its receiver recorded, the messages
from its `consumed`-th on at offsets below its `end`, read back from the
channel topic. A message sent but not yet in the log when the receiver
recorded is in no one's record; a token the receiver consumed after the
sender recorded it is in two. Whether a run's records lose or double the
token is up to the clocks: nothing here forces either.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from kstream.dataflow.job import Job
from kstream.dataflow.state.api import KeyedContext
from kstream.errors import CheckpointError
from kstream.examples.seed_ring import P, ProcessFn, Q, ring, token_key, token_process
from kstream.infra.client_settings import client_config
from kstream.runtime.channels.format import RECORD, BatchFormat, decode_header
from kstream.runtime.kafka import MANUAL_OFFSETS, request
from kstream.testing import read_all, unique_name
from kstream.tools.seeds.tables import TokenSnapshot

__all__ = [
    "LocalRecord",
    "Message",
    "NaiveSnapshot",
    "Recorder",
    "channel_messages",
    "compose",
    "is_token",
    "load_records",
    "naive_token_ring",
    "recording_ticks",
    "records_dir",
    "store_record",
]

#: Where the records go in a run's checkpoint storage.
NAIVE_DIR = "naive"
#: Seconds a process waits for its input channel's end offset.
END_TIMEOUT_S = 10.0


def is_token(value: Any) -> bool:
    """Whether a message between p and q is the token (``["token", hop]``)."""
    return isinstance(value, list) and value[:1] == ["token"]


@dataclass(frozen=True, slots=True)
class LocalRecord:
    """What one process recorded of itself at one tick of its own clock.

    `seq`: this process's record number (from 0); `tick`: its own ticks
    processed; `holds`/`hop`: its state; `channel`/`partition`: its input
    channel; `consumed`: messages of it processed; `end`: the channel's end
    offset (the next to be written) just after; `sent`: messages it sent on its
    output channel; `pid`: the OS process that recorded it.
    """

    process: str
    seq: int
    tick: int
    holds: bool
    hop: int | None
    channel: str
    partition: int
    consumed: int
    end: int
    sent: int
    pid: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LocalRecord:
        """Parse `to_json`'s output; `ValueError` naming what is wrong otherwise."""
        raw = json.loads(text)
        if not isinstance(raw, dict) or set(raw) != set(cls.__slots__):
            raise ValueError("not a local record of the naive scheme")
        for name in ("seq", "tick", "partition", "consumed", "end", "sent", "pid"):
            if type(raw[name]) is not int:
                raise ValueError(f"{name} is {raw[name]!r}, not an int")
        hop = raw["hop"]
        if type(raw["holds"]) is not bool or (hop is not None and type(hop) is not int):
            raise ValueError("holds/hop are not a bool and an int")
        return cls(**raw)


def records_dir(root: Path, process: str) -> Path:
    """Where `process`'s records go in checkpoint storage rooted at `root`."""
    return root / NAIVE_DIR / process


def store_record(root: Path, record: LocalRecord) -> None:
    """Store `record` durably: written, synced, then renamed into place (never half-read)."""
    target = records_dir(root, record.process)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f"{record.seq:06d}.json.tmp"
    with tmp.open("w") as f:
        f.write(record.to_json())
        f.flush()
        os.fsync(f.fileno())
    tmp.rename(target / f"{record.seq:06d}.json")


def load_records(root: Path, process: str) -> list[LocalRecord]:
    """`process`'s stored records in order; `CheckpointError` naming a damaged one."""
    out = []
    for path in sorted(records_dir(root, process).glob("*.json")):
        try:
            out.append(LocalRecord.from_json(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"{path} is unreadable: {exc}") from None
    return out


def _clock(seed: int, process: str, every: int) -> Iterator[int]:
    """The ticks of `process`'s own clock at which it records: seeded gaps of 1 to
    2 * `every` - 1 ticks (`every` on average), drawn independently per process."""
    rnd = random.Random(f"{seed}-{process}-naive")
    tick = 0
    while True:
        tick += rnd.randint(1, max(1, 2 * every - 1))
        yield tick


def recording_ticks(seed: int, process: str, every: int, ticks: int) -> list[int]:
    """The ticks, up to `ticks`, at which `process` records (its `Recorder`'s schedule)."""
    out: list[int] = []
    for tick in _clock(seed, process, every):
        if tick > ticks:
            return out
        out.append(tick)
    raise AssertionError("unreachable: the clock never ends")


class Recorder:
    """One process's naive recording, called by its operator for every message it processed.

    Holds the counters (ticks, consumed, sent) in memory: the naive scheme has
    no checkpoint to restore them from. The end offset is asked of Kafka at
    the moment of recording (I/O at the operator's edge, once per record).
    """

    def __init__(
        self,
        root: Path,
        process: str,
        bootstrap: str,
        channel: tuple[str, int],
        clock: Iterator[int],
    ) -> None:
        self._root = root
        self._process = process
        self._bootstrap = bootstrap
        self._channel = channel
        self._clock = clock
        self._due = next(clock)
        self._ticks = self._consumed = self._sent = self._seq = 0
        self._consumer: Consumer | None = None

    @classmethod
    def of(cls, params: dict[str, str], process: str, seed: int) -> Recorder:
        """The recorder of `process` in a job run with the naive parameters: `naive-records`
        (the storage root), `naive-every`, `bootstrap`, ``naive-<process>-input``
        (``topic:partition`` of its input channel)."""
        topic, partition = params[f"naive-{process}-input"].rsplit(":", 1)
        every = int(params["naive-every"])
        return cls(
            Path(params["naive-records"]),
            process,
            params["bootstrap"],
            (topic, int(partition)),
            _clock(seed, process, every),
        )

    def processed(self, value: Any, sent: int, held: Any) -> None:
        """`value` was processed, `sent` messages were sent for it, and the process's
        state is now `held` (``[hop, ticks left]`` or None); records on a due tick."""
        if is_token(value):
            self._consumed += 1  # from the input channel (not p's source's "token")
        self._sent += sent
        if value != "tick":
            return
        self._ticks += 1
        if self._ticks < self._due:
            return
        self._due = next(self._clock)
        record = LocalRecord(
            self._process,
            self._seq,
            self._ticks,
            held is not None,
            int(held[0]) if held is not None else None,
            self._channel[0],
            self._channel[1],
            self._consumed,
            self._end(),
            self._sent,
            os.getpid(),
        )
        store_record(self._root, record)
        self._seq += 1

    def _end(self) -> int:
        if self._consumer is None:
            self._consumer = Consumer(
                client_config(
                    self._bootstrap, MANUAL_OFFSETS, {"group.id": unique_name("kstream-naive")}
                )
            )
        consumer, (topic, partition) = self._consumer, self._channel
        _, high = request(
            lambda: consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=END_TIMEOUT_S, cached=False
            ),
            f"cannot read the end of {topic}[{partition}]",
            END_TIMEOUT_S,
        )
        return int(high)


def _recording(process: ProcessFn, recorder: Recorder) -> ProcessFn:
    """`process`, telling `recorder` what it processed and sent and what it then holds."""

    def recorded(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        out = list(process(key, value, ctx))
        recorder.processed(value, len(out), ctx.get())
        yield from out

    return recorded


def naive_token_ring(params: dict[str, str]) -> Job:
    """The token ring (`kstream.examples.seed_ring.token_ring`), p and q each recording
    their own state and input channel on their own clocks; run it without checkpoints.

    Parameters: the token ring's, and the naive ones `Recorder.of` names.
    """
    seed = int(params.get("seed", "0"))
    process = token_process(seed)
    return ring(
        params,
        token_key,
        _recording(process, Recorder.of(params, P, seed)),
        _recording(process, Recorder.of(params, Q, seed)),
        "token-ring",
    )


@dataclass(frozen=True, slots=True)
class Message:
    """A stream record of a channel: the Kafka offset of the batch it came in, its value."""

    offset: int
    value: Any


def channel_messages(
    bootstrap: str, channel: tuple[str, int], fmt: BatchFormat, keyed: bool
) -> list[Message]:
    """Every stream record of `channel` in channel order, read back from Kafka."""
    topic, partition = channel
    out = []
    for r in read_all(bootstrap, topic, isolation="read_uncommitted", partitions=[partition]):
        if r.value is None or decode_header(r.value)[0] != RECORD:
            continue  # a transaction marker or a control record: not a message
        for item in fmt.decode(r.value, keyed):
            out.append(Message(r.offset, item[1] if keyed else item))
    return out


@dataclass(frozen=True, slots=True)
class NaiveSnapshot:
    """One global state of the naive scheme: p's i-th record, q's i-th record, and the
    messages each one's record puts in its input channel (q's: p→q, p's: q→p)."""

    label: str
    p: LocalRecord
    q: LocalRecord
    p_to_q: tuple[Message, ...]
    q_to_p: tuple[Message, ...]

    @property
    def snapshot(self) -> TokenSnapshot:
        """Where it puts the token, in seed 000's table."""
        return TokenSnapshot(
            self.label,
            p_holds=self.p.holds,
            q_holds=self.q.holds,
            p_to_q=sum(1 for m in self.p_to_q if is_token(m.value)),
            q_to_p=sum(1 for m in self.q_to_p if is_token(m.value)),
            started_by="own clocks",
        )


def _queue(messages: Sequence[Message], receiver: LocalRecord) -> tuple[Message, ...]:
    """What `receiver` recorded in its input channel: the messages from its
    `consumed`-th on, in the log below its `end`."""
    return tuple(m for m in messages[receiver.consumed :] if m.offset < receiver.end)


def compose(
    p: Sequence[LocalRecord],
    q: Sequence[LocalRecord],
    p_to_q: Sequence[Message],
    q_to_p: Sequence[Message],
) -> list[NaiveSnapshot]:
    """The naive scheme's global states: p's i-th record with q's i-th, for as many
    as both made; `p_to_q`/`q_to_p`: the channels' messages (`channel_messages`)."""
    return [
        NaiveSnapshot(f"naive {i}", rp, rq, _queue(p_to_q, rq), _queue(q_to_p, rp))
        for i, (rp, rq) in enumerate(zip(p, q, strict=False), 1)
    ]
