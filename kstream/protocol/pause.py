"""Noticing that a loop's own process did not run (pure: the caller passes the clock).

A runner stopped with SIGSTOP (Ctrl-Z), paused with its VM, or starved of CPU
reads no heartbeat while it stands still; resumed, it would find every worker
silent for as long and blame one of them. `PauseWatch` tells the pause from the
time between the turns of the runner's loop, so the runner can say that it was
itself that stood still and hold the pause against nobody
(`kstream.protocol.coordination.Paused`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PauseWatch"]


@dataclass(slots=True)
class PauseWatch:
    """Pauses of at least `threshold` seconds between turns of one loop."""

    threshold: float
    _last: float | None = None

    def turn(self, now: float, waited: float = 0.0) -> float:
        """The loop reached a turn at `now`, having meant to wait up to `waited`
        seconds since its previous turn (a poll's timeout, say).

        Returns how much longer than that it took, if that is at least
        `threshold`: the pause; else 0. The first turn is never a pause.
        """
        last, self._last = self._last, now
        if last is None:
            return 0.0
        pause = now - last - waited
        return pause if pause >= self.threshold else 0.0
