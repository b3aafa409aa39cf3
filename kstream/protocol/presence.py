"""Is another coordinator running this job? The answer from the control topic.

The runner's file lock (`kstream.runtime.lock`) refuses a second runner that shares the
state directory. Job names also scope Kafka (the control, channel and commit
topics, the transactional ids), so two runners of one job with *different*
state directories against one cluster would corrupt each other just as well.
Every runner therefore announces itself in the job's control topic: a
``coordinator`` message when it starts, again every `HEARTBEAT_S`, and once
more with ``stopped: true`` when it stops cleanly.

A runner starting up looks at the last announcement in the history
(`last_presence`). If it is from a runner that did not say it stopped and is
recent, that runner may be alive, or may have been killed: `still_alive`
decides after waiting `WAIT_S` for a newer heartbeat of it (a live runner
sends several in that time, a dead one none), so a crashed runner delays the
next start by a few seconds and never blocks it.

Not covered: two runners starting within the same few seconds, each before the
other's first announcement is visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "HEARTBEAT_S",
    "RECENT_S",
    "WAIT_S",
    "Presence",
    "last_presence",
    "needs_wait",
    "still_alive",
]

#: How often a running coordinator announces itself.
HEARTBEAT_S = 1.0
#: How long a starting runner waits for a heartbeat of an unclosed predecessor:
#: three periods, so one slow round of the running coordinator is not death.
WAIT_S = 3 * HEARTBEAT_S
#: An announcement older than this (by its wall-clock time) is not waited for:
#: its runner has missed dozens of heartbeats. Generous, for clock skew between hosts.
RECENT_S = 60.0

_KIND = "coordinator"


@dataclass(frozen=True, slots=True)
class Presence:
    """One announcement of a coordinator (the runner of `kstream run`)."""

    incarnation: str
    pid: int
    host: str
    state_dir: str
    time: float
    stopped: bool = False

    def message(self) -> dict[str, Any]:
        """Its control-topic form."""
        return {
            "type": _KIND,
            "incarnation": self.incarnation,
            "pid": self.pid,
            "host": self.host,
            "state_dir": self.state_dir,
            "time": self.time,
            "stopped": self.stopped,
        }

    @classmethod
    def parse(cls, message: Mapping[str, object]) -> Presence | None:
        """The presence a control message announces, or None (another kind, malformed)."""
        if message.get("type") != _KIND:
            return None
        incarnation, pid, host = message.get("incarnation"), message.get("pid"), message.get("host")
        state_dir, when = message.get("state_dir"), message.get("time")
        if not (
            isinstance(incarnation, str)
            and isinstance(pid, int)
            and isinstance(host, str)
            and isinstance(state_dir, str)
            and isinstance(when, (int, float))
        ):
            return None
        return cls(incarnation, pid, host, state_dir, float(when), message.get("stopped") is True)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, state dir {self.state_dir}"


def last_presence(messages: Iterable[Mapping[str, object]]) -> Presence | None:
    """The newest announcement among control messages (in topic order), if any."""
    last = None
    for message in messages:
        presence = Presence.parse(message)
        if presence is not None:
            last = presence
    return last


def needs_wait(last: Presence | None, now: float) -> bool:
    """Whether `last` may belong to a live coordinator: not stopped, and recent."""
    return last is not None and not last.stopped and now - last.time < RECENT_S


def still_alive(later: Iterable[Mapping[str, object]]) -> Presence | None:
    """The announcement proving another coordinator alive, among the control
    messages written since this runner began to start (it has not announced
    itself yet, so every announcement there is another runner's); None if the
    newest one says it stopped, or none came.
    """
    alive = None
    for message in later:
        presence = Presence.parse(message)
        if presence is not None:
            alive = None if presence.stopped else presence
    return alive
