"""A file the coordinator touches while its loop turns: a liveness signal for a supervisor.

kstream serves no HTTP endpoint, so a supervisor (Kubernetes' exec probe, a
systemd watchdog script) learns that a coordinator is alive *and not stuck* from a
file's modification time: `AliveFile.beat` is called once per turn of the
runner's loop and touches the file at most once per `every` seconds; `age` tells
how long ago it was last touched. A loop stuck in a call stops the beats, and the
file's age grows until the probe fails.

The modification time is wall-clock time (it is what the file system keeps); the
probe runs on the same host, so both read the same clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kstream.errors import ConfigurationError

__all__ = ["AliveFile", "age"]


class AliveFile:
    """Touches `path` on `beat`, at most once per `every` seconds (by `clock`).

    Raises `ConfigurationError` when the file's directory does not exist. The
    first `beat` always touches the file (and creates it). `clear` removes it, so
    a coordinator that stopped cleanly is not taken for a live one by a probe
    that runs before the container goes.
    """

    def __init__(
        self, path: Path, *, every: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not every > 0:
            raise ConfigurationError(f"a liveness file's interval must be > 0, got {every}")
        # Refused at start, before a job loads: not at the first beat, minutes later.
        if not path.parent.is_dir():
            raise ConfigurationError(f"the liveness file's directory {path.parent} does not exist")
        self.path = path
        self.every = every
        self._clock = clock
        self._last: float | None = None

    def beat(self) -> None:
        """Touch the file unless it was touched less than `every` seconds ago.

        Raises `ConfigurationError` (one line, naming the file) when it cannot be
        written: a probe reading a file that never changes would kill a healthy
        coordinator, so this is refused at the first beat rather than hidden.
        """
        now = self._clock()
        if self._last is not None and now - self._last < self.every:
            return
        try:
            self.path.touch()  # creates it, or sets its times to now
        except OSError as exc:
            raise ConfigurationError(
                f"cannot touch the liveness file {self.path}: {exc.strerror or exc}"
            ) from None
        self._last = now

    def clear(self) -> None:
        """Remove the file (a missing one is fine)."""
        self.path.unlink(missing_ok=True)


def age(path: Path, *, now: float | None = None) -> float | None:
    """Seconds since `path` was last touched (wall clock, `now` or the current
    time), or None if it does not exist. Never negative."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)
