"""What the checkpoint tests share: recording sinks and writers, a subject over a real state."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from kstream.dataflow.outputs import SinkSnapshot, SinkWriter
from kstream.dataflow.state.serde import MSGPACK
from kstream.runtime.checkpoint.take import Subject
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_bytes

OP = "s1.process"


class RecordingWriter(SinkWriter):
    """A sink writer that logs its protocol calls into a log shared with the others."""

    def __init__(
        self,
        name: str,
        log: list[str],
        payload: Any = None,
        finish: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.log = log
        self.payload = payload
        self.finish = finish

    def write(self, value: Any) -> None:
        self.log.append(f"write {self.name} {value}")

    def begin_epoch(self, epoch: int) -> None:
        self.log.append(f"begin {self.name} {epoch}")

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        self.log.append(f"pre-commit {self.name} {epoch}")
        return SinkSnapshot({"epoch": epoch, "sink": self.name}, self.payload, self.finish)


class RecordingBarriers:
    """A channel writer of which only barriers are seen."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def barrier(self, checkpoint: int) -> None:
        self.log.append(f"barrier {checkpoint}")


class RecordingFaults:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def hit(self, point: str, checkpoint: int) -> None:
        self.log.append(f"fault point {point} {checkpoint}")


def put(store: StateStore, key: str, value: Any) -> None:
    """Set `key`'s value of operator `OP` (cached until the store flushes)."""
    ctx = store.context(OP)
    ctx.key = key_bytes(key)
    ctx.set(value)


def get(store: StateStore, key: str) -> Any:
    ctx = store.context(OP)
    ctx.key = key_bytes(key)
    return ctx.get()


def subject(
    tmp_path: Path,
    executor: Executor,
    state: StateStore | None,
    log: list[str],
    sinks: dict[str, SinkWriter] | None = None,
    watermarks: dict[str, Any] | None = None,
) -> Subject:
    return Subject(
        task="s1-0",
        generation=7,
        identity="fingerprint",
        state=state,
        state_serde=MSGPACK.name,
        key_format=KEY_FORMAT,
        max_parallelism=128,
        parallelism=2,
        staging=tmp_path / "staging",
        executor=executor,
        sinks=sinks or {},
        writers=[RecordingBarriers(log)],
        faults=RecordingFaults(log),
        watermarks=lambda: dict(watermarks or {}),
    )
