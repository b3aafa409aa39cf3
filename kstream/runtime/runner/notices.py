"""Rate-limited one-line notices for the console of `kstream run` (pure, no I/O).

A job in trouble can produce thousands of dead letters or aborted checkpoints a
minute; the console must say so without drowning. `Notices` prints at most one
line per kind (dead letter, aborted checkpoint, recovery, …) per `period`
seconds. What it holds back is not lost: the next line of that kind (sent by
`offer`, or by `tick` once the period is over) shows the latest example and
how many more there were, e.g. ``dead letter: … (+41 more)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NOTICE_PERIOD_S", "Notices"]

#: At most one line per kind this often: readable, and still prompt.
NOTICE_PERIOD_S = 5.0


@dataclass(slots=True)
class _Kind:
    last_shown: float | None = None
    held: int = 0
    example: str = ""


@dataclass(slots=True)
class Notices:
    """Decides which notices to show now; the caller supplies the clock and prints."""

    period: float = NOTICE_PERIOD_S
    _kinds: dict[str, _Kind] = field(default_factory=dict)

    def offer(self, kind: str, text: str, now: float, count: int = 1) -> list[str]:
        """`count` events of `kind`, the latest described by `text`; the lines to show now."""
        k = self._kinds.setdefault(kind, _Kind())
        k.held += count
        k.example = text
        return self._release(k, now)

    def tick(self, now: float) -> list[str]:
        """Lines held back whose period is over."""
        return [line for k in self._kinds.values() for line in self._release(k, now)]

    def flush(self, now: float) -> list[str]:
        """Every line held back, period or not (the run is ending)."""
        return [line for k in self._kinds.values() for line in self._release(k, now, force=True)]

    def _release(self, k: _Kind, now: float, force: bool = False) -> list[str]:
        if k.held == 0:
            return []
        if not force and k.last_shown is not None and now - k.last_shown < self.period:
            return []
        line = k.example if k.held == 1 else f"{k.example} (+{k.held - 1} more)"
        k.last_shown, k.held, k.example = now, 0, ""
        return [line]
