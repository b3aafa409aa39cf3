"""Bounded names for why a checkpoint aborted and why the job rolled back.

The coordinator's reasons are sentences for people ("declined by s1-0:
snapshot not stored: ..."), which name subtasks, checkpoints and errors: as a
metric label they would make a new time series per sentence. These functions
map each to one of a fixed list of values, by the sentence's start, which the
coordinator (`kstream.protocol.coordinator`) and the runner write; a sentence
nobody foresaw is ``other``. The lists are what a metric's label may take.
"""

from __future__ import annotations

import re

__all__ = ["ABORT_REASONS", "RECOVERY_CAUSES", "abort_reason", "recovery_cause"]

#: Prefix patterns of `Abort` reasons, in the order they are tried.
_ABORTS: tuple[tuple[str, str], ...] = (
    ("timeout", r"not complete within "),
    ("declined", r"declined by "),
    ("subsumed", r"subsumed by "),
    ("overtaken", r"overtaken by "),
    ("too_many_in_flight", r"started by .* checkpoints were in flight"),
    ("stale", r"older than completed "),
    ("coordinator_restarted", r"coordinator restarted"),
    ("stopped", r"job stopped"),
)
#: Every value `abort_reason` returns.
ABORT_REASONS: tuple[str, ...] = (*(name for name, _ in _ABORTS), "other")

#: Patterns of `Recover` reasons (joined by "; " when several hold: the first wins).
#: The job's start is a `Recover` too, but not a recovery: nobody counts it.
_RECOVERIES: tuple[tuple[str, str], ...] = (
    ("worker_lost", r"worker \S+ lost"),
    ("worker_silent", r"worker \S+ silent for"),
    ("worker_restarted", r"worker \S+ restarted"),
    ("second_process", r"worker \S+ claimed by a second process"),
    ("checkpoint_damaged", r"checkpoint \d+ is damaged"),
    ("checkpoint_timeouts", r"checkpoint \d+ not complete within "),
)
#: Every value `recovery_cause` returns.
RECOVERY_CAUSES: tuple[str, ...] = (*(name for name, _ in _RECOVERIES), "other")

_ABORT_RES = tuple((name, re.compile(pattern)) for name, pattern in _ABORTS)
_RECOVERY_RES = tuple((name, re.compile(pattern)) for name, pattern in _RECOVERIES)


def abort_reason(reason: str) -> str:
    """The bounded name (one of `ABORT_REASONS`) of an abort's `reason`."""
    for name, pattern in _ABORT_RES:
        if pattern.match(reason):
            return name
    return "other"


def recovery_cause(reason: str) -> str:
    """The bounded name (one of `RECOVERY_CAUSES`) of a rollback's `reason`."""
    for name, pattern in _RECOVERY_RES:
        if pattern.match(reason):
            return name
    return "other"
