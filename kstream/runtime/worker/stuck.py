"""A watchdog for calls of the job's code that do not return.

A subtask's user function that never returns (a call on a dead socket, a lock
never released, an endless loop) holds the worker's main loop: its
checkpoints time out and the job rolls back, without anything naming the
record or the function. `CallWatch` runs a thread that samples the main
thread's stack once a second. When the same call of the job's code (the same
frame: one call, not one function) has been on the stack for `STUCK_CALL_S`,
it describes it in one line: the subtask, the function (the outermost frame
of neither kstream nor the standard library: the one kstream called), the
record (the short repr of the function's arguments, and for a source subtask
the topic, partition and offset it came from) and where the call is stuck
(the innermost frame). The worker's heartbeat carries the line
(`WorkerAlive.stuck`) to the runner, which prints it, and the coordinator
fails the job when the same call sticks again after the rollback it caused
(`kstream.protocol.coordinator`).

Sampling another thread's stack is what debuggers and profilers do; the
sampled thread is not slowed down, and nothing is done per record.
"""

from __future__ import annotations

import functools
import logging
import reprlib
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

__all__ = ["STUCK_CALL_S", "CallWatch", "StuckCall"]

log = logging.getLogger("kstream.worker")

#: A call of the job's code on the stack for this long is reported stuck. Far
#: above any sensible per-record time, far below the default checkpoint timeout
#: (so the report comes before the checkpoints that time out).
STUCK_CALL_S = 10.0
#: How often the watchdog samples the main thread's stack.
SAMPLE_S = 1.0

_SHORT = reprlib.Repr()
_SHORT.maxstring = 40
_SHORT.maxother = 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4
#: Where the standard library lives: its frames are not the job's code.
_STDLIB = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


@dataclass(frozen=True, slots=True)
class StuckCall:
    """A call of the job's code that has not returned for `STUCK_CALL_S` seconds.

    `line` is the one-line report; `on` identifies the call across processes
    (subtask, function, arguments and source record, not the time or frame):
    the same call stuck again after a rollback has the same `on`.
    """

    line: str
    on: str


def _is_kstream(frame: FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and (name == "kstream" or name.startswith("kstream."))


def _is_stdlib(frame: FrameType) -> bool:
    return _in_stdlib(frame.f_code.co_filename)


@functools.lru_cache(maxsize=1024)
def _in_stdlib(filename: str) -> bool:
    # Resolving costs a system call per path component: once per file.
    return str(Path(filename).resolve()).startswith(_STDLIB)


def _where(frame: FrameType) -> str:
    code = frame.f_code
    return f"{Path(code.co_filename).name}:{frame.f_lineno} in {code.co_name}"


def user_call(top: FrameType, below: CodeType | None = None) -> FrameType | None:
    """The call of the job's code on a stack whose innermost frame is `top`.

    The outermost frame, below the first frame running `below` (the worker's
    loop: what calls it, a command line's framework, is not looked at), that
    belongs to neither kstream nor the standard library: the function kstream
    called (None: kstream's own code runs).
    """
    found = None
    frame: FrameType | None = top
    while frame is not None and frame.f_code is not below:
        if not _is_kstream(frame) and not _is_stdlib(frame):
            found = frame
        frame = frame.f_back
    return found


def _arguments(frame: FrameType) -> str:
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount]
    # Read from another thread while the call waits: a snapshot, never written.
    values = frame.f_locals
    args = [_SHORT.repr(values[n]) for n in names if n in values and n != "self"]
    return ", ".join(args)


class CallWatch:
    """Samples the stack of the thread that called `start` (the worker's main loop).

    That thread sets `task` to the subtask it polls (None between polls): one
    store per poll, nothing per record. `stuck()` is the current report, or None.
    """

    def __init__(self, threshold: float = STUCK_CALL_S) -> None:
        self.threshold = threshold
        #: The subtask being polled: its `id` and `current_record()` name it.
        self.task: Any = None
        self._ident: int | None = None
        self._loop: CodeType | None = None
        self._frame: FrameType | None = None
        self._since = 0.0
        self._stuck: StuckCall | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Watch the calling thread, below the calling function, from a daemon thread."""
        self._ident = threading.get_ident()
        self._loop = sys._getframe(1).f_code
        self._thread = threading.Thread(target=self._run, name="call-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stuck(self) -> StuckCall | None:
        """The call reported stuck now (None: none)."""
        return self._stuck

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self.sample(time.monotonic())
            except Exception as exc:  # a report is not worth the worker
                log.warning("call watch: %s", exc)

    def sample(self, now: float) -> None:
        """Look at the watched thread's stack once."""
        top = sys._current_frames().get(self._ident or 0)
        task = self.task
        call = user_call(top, self._loop) if top is not None and task is not None else None
        if call is None or call is not self._frame:
            # Another call (or none): a new one is timed from here.
            self._frame, self._since, self._stuck = call, now, None
            return
        if self._stuck is not None or now - self._since < self.threshold:
            return
        assert top is not None
        function = f"{call.f_code.co_qualname}()"
        args = _arguments(call)
        record = task.current_record()
        source = f" from {record}" if record else ""
        on = f"{task.id}: {function} on ({args}){source}"
        self._stuck = StuckCall(
            f"{task.id}: {function} ({Path(call.f_code.co_filename).name}:"
            f"{call.f_code.co_firstlineno}) has not returned for {self.threshold:g}s on "
            f"({args}){source}; stuck at {_where(top)}",
            on,
        )
        log.warning("%s", self._stuck.line)
