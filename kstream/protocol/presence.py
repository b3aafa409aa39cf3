"""Is another coordinator running this job? The answer from the control topic.

The runner's file lock (`kstream.runtime.lock`) refuses a second runner that shares the
state directory. Job names also scope Kafka (the control, channel and commit
topics, the transactional ids), so two runners of one job with *different*
state directories against one cluster would corrupt each other just as well.
Every runner therefore announces itself in the job's control topic: a
``coordinator`` message when it starts, again every `HEARTBEAT_S` (every
`IDLE_HEARTBEAT_S` while the job is idle: each announcement is a transaction of
the fenced control writer, the costliest thing an idle job asks of the broker),
and once more with ``stopped: true`` when it stops cleanly. Each announcement
says how long until the next one at most (``every``), and the next one keeps
that promise even when the period changes (`announce_due`): a job that falls
idle right after announcing every second announces once more within the
second, saying ``every: 4``, before it waits longer.

A runner starting up looks at the last announcement in the history
(`last_presence`). If it is from a runner that did not say it stopped and is
recent, that runner may be alive, or may have been killed: `still_alive`
decides after waiting `wait_s` for a newer heartbeat of it (the announced
period and `SLOW_ROUND_S` more: a live runner sends one in that time, a dead
one none), so a crashed runner delays the next start by a few seconds and
never blocks it.

Not covered: two runners starting within the same few seconds, each before the
other's first announcement is visible.
"""

from __future__ import annotations

from collections.abc import Iterable

from kstream.protocol.messages import ControlMessage, Presence

__all__ = [
    "HEARTBEAT_S",
    "IDLE_HEARTBEAT_S",
    "RECENT_S",
    "SLOW_ROUND_S",
    "Presence",
    "announce_due",
    "last_presence",
    "needs_wait",
    "period_s",
    "still_alive",
    "wait_s",
]

#: How often a running coordinator announces itself.
HEARTBEAT_S = 1.0
#: How often it does while the job is idle (`kstream.protocol.coordinator`).
IDLE_HEARTBEAT_S = 4.0
#: How late an announcement may be and its runner still alive: a slow round of
#: the running coordinator (a stalled broker request, a pause of the process).
SLOW_ROUND_S = 2.0
#: An announcement older than this (by its wall-clock time) is not waited for:
#: its runner has missed dozens of heartbeats. Generous, for clock skew between hosts.
RECENT_S = 60.0


def last_presence(messages: Iterable[ControlMessage]) -> Presence | None:
    """The newest announcement among control messages (in topic order), if any."""
    last = None
    for message in messages:
        if isinstance(message, Presence):
            last = message
    return last


def needs_wait(last: Presence | None, now: float) -> bool:
    """Whether `last` may belong to a live coordinator: not stopped, and recent."""
    return last is not None and not last.stopped and now - last.time < RECENT_S


def period_s(idle: bool) -> float:
    """How often a running coordinator announces itself, the job `idle` or not
    (`kstream.protocol.coordinator.Coordinator.idle`)."""
    return IDLE_HEARTBEAT_S if idle else HEARTBEAT_S


def announce_due(since_s: float, promised_s: float, idle: bool) -> bool:
    """Whether a running coordinator announces itself now: `since_s` after its last
    announcement, which promised the next within `promised_s`, the job `idle` or not.

    Due after the shorter of the promise and the current period: a waiting
    runner trusts the last announcement's ``every`` (`wait_s`), so lengthening
    the period must wait for an announcement that says so.
    """
    return since_s >= min(promised_s, period_s(idle))


def wait_s(last: Presence) -> float:
    """How long a starting runner waits for a heartbeat of the runner that sent
    `last` before it takes over: its announced period (bounded by `RECENT_S`)
    and a slow round."""
    return min(last.every, RECENT_S) + SLOW_ROUND_S


def still_alive(later: Iterable[ControlMessage]) -> Presence | None:
    """The announcement proving another coordinator alive, among the control
    messages written since this runner began to start (it has not announced
    itself yet, so every announcement there is another runner's); None if the
    newest one says it stopped, or none came.
    """
    alive = None
    for message in later:
        if isinstance(message, Presence):
            alive = None if message.stopped else message
    return alive
