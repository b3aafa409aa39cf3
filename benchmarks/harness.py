"""What the figure benchmarks share: a kstream job run in-process, and quantiles.

`RunningJob` runs a job's coordinator (`Runner`) on a background thread, so the
benchmark's own thread can produce input at a rate, read the output
read_committed and kill workers, while the coordinator keeps stepping. Worker
processes are real OS processes, as under ``kstream run``.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from kstream.protocol.coordination import IDLE_AFTER, CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.purge import ChannelPurger
from kstream.runtime.runner.runner import Runner
from kstream.runtime.runner.running import RunningJob as Started
from kstream.tools.spec import load_job

#: kstream's worker processes in every figure (the throughput comparison's 2 workers).
WORKERS = 2
#: Figure jobs loaded by path (the worker processes import the file, not the package).
FIGURE_JOBS = Path(__file__).resolve().parent / "figure_jobs.py"


def percentile(values: list[float], q: float) -> float | None:
    """The `q`-quantile (0..1) of `values`, nearest rank; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least q of the values at or below it
    # (rounded first, so that 0.99 * 100 is rank 99 despite binary fractions).
    rank = math.ceil(round(q * len(ordered), 9))
    return ordered[min(len(ordered), max(rank, 1)) - 1]


def quantiles(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of `values` (None each when empty), with their count."""
    return {
        "n": len(values),
        "p50": percentile(values, 0.5),
        "p99": percentile(values, 0.99),
        "max": max(values, default=None),
    }


def vm_kib(pid: int, field: str) -> int | None:
    """A process's `field` of /proc/<pid>/status (``VmRSS``, ``VmHWM``) in KiB; None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class _KeepChannels(ChannelPurger):
    """Purges nothing: the bytes figure reads back every channel record the job wrote."""

    def purge(self) -> None:
        return


class RunningJob:
    """A figure job (`FIGURE_JOBS`:`name`) run by a `Runner` stepping on a background thread.

    Use as a context manager: entering prepares and starts the job, leaving
    stops the coordinator thread and the workers. An error of the coordinator
    (a failed job) is raised by `check` and on leaving. With `keep_channels`
    no channel record is purged (the bytes figure counts them all).
    """

    def __init__(
        self,
        bootstrap: str,
        name: str,
        params: dict[str, str],
        *,
        interval: float,
        workers: int = WORKERS,
        keep_channels: bool = False,
        idle_checkpoints: bool = True,
        max_in_flight: int = 1,
    ) -> None:
        spec = f"{FIGURE_JOBS}:{name}"
        self._state = tempfile.TemporaryDirectory(prefix="kstream-figures-")
        self.job = load_job(spec, params)
        self.runner = Runner(
            RunConfig(
                JobRef(spec, params),
                bootstrap,
                workers,
                Path(self._state.name),
                checkpoints=CoordinatorConfig(
                    interval=interval,
                    idle_after=IDLE_AFTER if idle_checkpoints else 0,
                    max_in_flight=max_in_flight,
                ),
            ),
            self.job,
            say=lambda _: None,
        )
        if keep_channels:
            self.runner.purger = _KeepChannels(bootstrap)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="coordinator", daemon=True)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.running.step()
        except BaseException as exc:  # raised to the benchmark's thread by `check`
            self._error = exc

    def __enter__(self) -> RunningJob:
        self.runner.prepare()
        #: The started job, which the coordinator thread steps.
        self.running: Started = self.runner.start()
        self._thread.start()
        return self

    def check(self) -> None:
        """Raise the coordinator's error, if it stopped with one."""
        if self._error is not None:
            raise RuntimeError(f"the job failed: {self._error}") from self._error

    def wait(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        """Poll `done` until true; `TimeoutError` naming `what` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
            time.sleep(0.02)  # polling interval of an external process's progress

    def covered(self, topic: str, ends: dict[int, int]) -> bool:
        """Whether a completed checkpoint covers `topic` up to `ends` (partition -> offset)."""
        offsets = self.runner.stats.source_offsets.get(topic, {})
        return all(offsets.get(p, 0) >= e for p, e in ends.items() if e > 0)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.running.stop()
        finally:
            self._state.cleanup()
        if kind is None:
            self.check()
