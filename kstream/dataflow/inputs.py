"""The source contract: what a job reads (`Source`) and where it starts (`StartPosition`).

Pure: a source describes itself here; reading Kafka is the runtime's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal

from kstream.dataflow.serde import Serde
from kstream.dataflow.types import Timestamps
from kstream.protocol.watermarks import WatermarkConfig

__all__ = ["Source", "StartPosition"]

#: Where a source starts reading when no checkpoint says where it was.
StartPosition = Literal["earliest", "latest"]


class Source(ABC):
    """Where records come from: a description of a Kafka topic to read.

    The runtime builds the reader itself (a consumer per source subtask that
    keeps its offsets in checkpoints), so a source only answers questions.
    Every process builds the job from its spec, so the answers must be the same
    in every process.

    ================= ========================================================
    member            read or called
    ================= ========================================================
    `name`            when the job graph is built (`Job.source`) and when the
                      job's identity is fingerprinted; must not change
    `partitions`      by the runner once per run, before any worker starts
                      (raising `ConfigurationError` refuses the run), and by
                      every source subtask once when it opens
    `topic`           by every source subtask once when it opens
    `serde`           by every source subtask once when it opens; its `loads`
                      then decodes every record (a `DecodeError` goes to the
                      job's error policy)
    `start`           by every source subtask that opens without a checkpoint
                      to restore (a restored subtask resumes at its offsets)
    `snapshot_every`  by every source subtask once when it opens
    ================= ========================================================

    Implemented by `kstream.connectors.kafka.KafkaSource`.
    """

    #: The Kafka topic read. Subtask s of P reads its partitions p with p % P == s.
    topic: str
    #: Where to start without a checkpoint: the earliest retained record or the end.
    start: StartPosition
    #: Event time of its records (None: the stream has none; see `watermark_config`).
    timestamps: Timestamps = None
    #: Seconds between the snapshots each of its subtasks starts itself (None:
    #: only the coordinator's and requested ones; `kstream.protocol.initiation`).
    snapshot_every: float | None = None

    def watermark_config(self) -> WatermarkConfig:
        """How its subtasks make watermarks from the timestamps (read when one opens)."""
        return WatermarkConfig()

    @property
    @abstractmethod
    def name(self) -> str:
        """A label for logs, operator names and the job's identity."""

    @property
    @abstractmethod
    def serde(self) -> Serde:
        """Decodes each record's value."""

    @abstractmethod
    def partitions(self, bootstrap: str) -> int:
        """Number of partitions of `topic` on `bootstrap`.

        Raises `ConfigurationError` if the topic does not exist (a run is refused
        before it starts) and `KafkaUnavailableError` if the cluster does not answer.
        """
