"""Why a worker process ended, and whether restarting it can help.

A worker that dies is restarted and the job rolls back to its latest
checkpoint: right for a failure that passes (the broker was away, a record was
lost in flight, the process was killed), wrong for one that repeats on every
restart (the job module does not import, a state value its serde cannot store,
an output topic that refuses the job's records, a user function that exits the
process). Those must stop the job at once, saying why in one line, instead of
restarting the worker `MAX_RESTARTS` times into the same failure.

`classify` makes that call for an exception that ends a worker (pure, no I/O).
The worker (`kstream worker`, spawned by a runner) writes the resulting
`Failure` to a small file named after its pid in the directory the runner
names in `CAUSE_DIR_ENV` (`write_cause`); the runner reads it when it sees the
process exit (`read_cause`), so the cause reaches the runner's console and the
job fails fast when the failure is deterministic. A process that could not
write the file still tells a failed job or a user exit by its exit code,
`EXIT_FATAL`: user code cannot pass off its own exit as that, since `sys.exit`,
`os._exit` and `KeyboardInterrupt` in the worker are intercepted and reported.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import NoReturn

from kstream.errors import (
    ConfigurationError,
    JobFailedError,
    KStreamError,
    RecordLostError,
)

__all__ = [
    "CAUSE_DIR_ENV",
    "EXIT_FATAL",
    "Failure",
    "cause_path",
    "classify",
    "exit_failure",
    "frame_place",
    "guard_os_exit",
    "read_cause",
    "traceback_place",
    "write_cause",
]

#: The environment variable in which a runner names the directory for its workers' causes.
CAUSE_DIR_ENV = "KSTREAM_CAUSE_DIR"
#: A worker's exit code for a failed job or a user exit: the job must stop.
EXIT_FATAL = 3
#: What the broker says of a record it refuses on validation (Kafka's INVALID_RECORD),
#: e.g. a record without a key on a compacted topic: it refuses it again after a rollback.
_INVALID_RECORD = "failed to validate record"
_KSTREAM_DIR = str(Path(__file__).resolve().parent.parent) + os.sep


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a worker ended (`cause`, one line) and whether a restart would meet it again."""

    cause: str
    deterministic: bool
    #: The log the process wrote to ("" when it was not told one: its output went
    #: to the standbys' log).
    log: str = ""

    def to_json(self) -> str:
        body = {"cause": self.cause, "deterministic": self.deterministic, "log": self.log}
        return json.dumps(body)

    @classmethod
    def from_json(cls, text: str) -> Failure | None:
        """The failure `text` describes; None for anything else (a partly written file)."""
        try:
            raw = json.loads(text)
            return cls(str(raw["cause"]), bool(raw["deterministic"]), str(raw.get("log", "")))
        except (ValueError, KeyError, TypeError):
            return None


def classify(exc: BaseException) -> Failure:
    """The `Failure` an exception ending a worker stands for.

    Deterministic (the job stops): a user function's `SystemExit` or
    `KeyboardInterrupt` (the worker's SIGINT handler never raises it, so one
    raised inside the worker is code's, not the user's Ctrl-C); `JobFailedError`
    (the job's error policy said stop); any `ConfigurationError` (the job does
    not load, a state value its serde cannot store, ACLs, credentials); a
    record the broker refuses on validation. Everything else is transient and
    recovered from: Kafka unavailable, records lost in flight, fenced
    producers, checkpoint I/O, and errors kstream did not foresee.
    """
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is not None else 0
        return Failure(f"{_who(exc.__traceback__)} called sys.exit({code!r})", True)
    if isinstance(exc, KeyboardInterrupt):
        return Failure(f"{_who(exc.__traceback__)} raised KeyboardInterrupt", True)
    message = _one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, JobFailedError):
        return Failure(f"job failed: {message}", True)
    if isinstance(exc, ConfigurationError):
        return Failure(message, True)
    if isinstance(exc, RecordLostError) and _INVALID_RECORD in message:
        return Failure(
            f"{message}; the broker refuses these records on every retry (a compacted "
            "topic refuses records without a key: key them, e.g. with key_by)",
            True,
        )
    if isinstance(exc, KStreamError):
        return Failure(message, False)
    return Failure(f"{type(exc).__name__}: {message}{traceback_place(exc.__traceback__)}", False)


def exit_failure(code: int, frame: FrameType | None) -> Failure:
    """The failure of code that called ``os._exit(code)`` in `frame`."""
    where = frame_place(frame)
    who = f"user code{where}" if where else "kstream"
    return Failure(f"{who} called os._exit({code})", True)


def traceback_place(tb: TracebackType | None) -> str:
    """`` (file, line N, in function)`` of the innermost frame of `tb` outside kstream."""
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith(_KSTREAM_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    return f" ({f.filename}, line {f.lineno}, in {f.name})"


def frame_place(frame: FrameType | None) -> str:
    """`traceback_place` for a live frame (the caller of ``os._exit``) and its callers."""
    frames = [f for f in traceback.extract_stack(frame) if not f.filename.startswith(_KSTREAM_DIR)]
    if not frames:
        return ""
    f = frames[-1]
    return f" ({f.filename}, line {f.lineno}, in {f.name})"


def _who(tb: TracebackType | None) -> str:
    where = traceback_place(tb)
    return f"user code{where}" if where else "kstream"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def guard_os_exit(report: Callable[[Failure], None]) -> None:
    """Make ``os._exit`` in this process report its caller as a deterministic failure.

    ``os._exit(n)`` skips every handler, so without this a user function calling
    it ends the worker with an exit code of the user's choosing and no cause.
    Now `report` hears of it and the process exits with `EXIT_FATAL`. Forked
    children (another pid) exit as they asked.
    """
    real = os._exit
    me = os.getpid()

    def _exit(status: int) -> NoReturn:
        if os.getpid() == me:
            report(exit_failure(status, sys._getframe(1)))
            real(EXIT_FATAL)
        real(status)

    os._exit = _exit


def cause_path(directory: Path, pid: int) -> Path:
    """The file in which process `pid` reports its failure."""
    return directory / f"{pid}.json"


def write_cause(directory: Path, failure: Failure) -> None:
    """Report `failure` as this process's, atomically (the reader sees all or nothing)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = cause_path(directory, os.getpid())
    tmp = path.with_suffix(".tmp")
    tmp.write_text(failure.to_json())
    os.replace(tmp, path)


def read_cause(directory: Path, pid: int) -> Failure | None:
    """The failure process `pid` reported, if it did; the report is consumed."""
    path = cause_path(directory, pid)
    try:
        text = path.read_text()
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return Failure.from_json(text)
