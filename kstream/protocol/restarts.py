"""How many worker restarts are too many: a sliding window over restart times.

Pure: the runner counts each restart it is about to do at its monotonic time
and fails the job when the budget says no.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW_S", "RestartBudget"]

#: Workers restarted more often than this within `RESTART_WINDOW_S` fail the job.
MAX_RESTARTS = 20
RESTART_WINDOW_S = 120.0


@dataclass(slots=True)
class RestartBudget:
    """At most `max_restarts` restarts within any `window_s` seconds (of every worker)."""

    max_restarts: int = MAX_RESTARTS
    window_s: float = RESTART_WINDOW_S
    #: The times of the restarts counted within the window, oldest first.
    _times: list[float] = field(default_factory=list, init=False)

    def allow(self, now: float) -> bool:
        """Count a restart at `now` (not earlier than the last); False if that makes
        more than `max_restarts` within `window_s` seconds before `now`."""
        self._times = [t for t in self._times if now - t < self.window_s]
        self._times.append(now)
        return len(self._times) <= self.max_restarts
