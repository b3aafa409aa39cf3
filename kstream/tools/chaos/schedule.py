"""When which fault happens (pure): a seeded schedule, and the fault windows.

A schedule is a sequence of `Fault`s at times after the campaign's start:
gaps drawn from an exponential distribution (faults arrive as a Poisson
process, so some come close together and overlap), and with probability
`combine` a second fault at the same moment. `pick` is a random number the
injector uses to choose its target (which worker, which protocol point), so
one seed gives one schedule whatever the processes' pids are.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from kstream.errors import ConfigurationError

__all__ = [
    "KINDS",
    "SINK_KINDS",
    "Fault",
    "LastFault",
    "may_strike",
    "parse_kinds",
    "schedule",
    "window_of",
]

#: Every kind of fault, in the order the report lists them.
KINDS = (
    "worker-kill",
    "fault-point",
    "worker-stop",
    "runner-kill",
    "broker-kill",
    "broker-pause",
    "broker-bounce",
)
#: Kinds that hit what a sink workload writes into, allowed only with that workload
#: (`Workload.fault_kinds`): PostgreSQL stopped (fast shutdown) and started again.
SINK_KINDS = ("postgres-restart",)
#: Weights of the kinds: process faults are cheap and most common; broker faults
#: stall the whole job for tens of seconds, so they are rarer.
WEIGHTS = {
    "worker-kill": 5,
    "fault-point": 5,
    "worker-stop": 2,
    "runner-kill": 2,
    "broker-kill": 1,
    "broker-pause": 1,
    "broker-bounce": 1,
    "postgres-restart": 1,
}


@dataclass(frozen=True, slots=True)
class Fault:
    """Fault `kind` due `at` seconds after the start; `pick` chooses its target."""

    at: float
    kind: str
    pick: int


def parse_kinds(spec: str, available: Sequence[str] = KINDS) -> tuple[str, ...]:
    """``all`` (every one of `available`) or a comma-separated list of `available`
    (`KINDS`, and the sink kinds a workload allows); raises `ConfigurationError`."""
    if spec.strip() == "all":
        return tuple(available)
    kinds = tuple(k.strip() for k in spec.split(",") if k.strip())
    unknown = [k for k in kinds if k not in available]
    if unknown or not kinds:
        raise ConfigurationError(
            f"--kinds must be 'all' or some of {', '.join(available)}; got {spec!r}"
        )
    return kinds


def schedule(
    seed: int,
    duration: float,
    mean_gap: float,
    kinds: Sequence[str] = KINDS,
    *,
    warmup: float = 20.0,
    combine: float = 0.15,
) -> tuple[Fault, ...]:
    """The faults of one campaign: the first after `warmup`, none at or after `duration`.

    Deterministic for equal arguments; times are non-decreasing.
    """
    if mean_gap <= 0 or duration <= 0 or not kinds:
        raise ConfigurationError("a schedule needs a positive duration, gap and some kinds")
    rnd = random.Random(seed)
    weights = [WEIGHTS[k] for k in kinds]
    out: list[Fault] = []
    t = warmup
    while t < duration:
        out.append(Fault(round(t, 3), rnd.choices(kinds, weights)[0], rnd.randrange(1 << 30)))
        if rnd.random() < combine:
            out.append(Fault(round(t, 3), rnd.choices(kinds, weights)[0], rnd.randrange(1 << 30)))
        t += rnd.expovariate(1.0 / mean_gap)
    return tuple(out)


def window_of(starts: Sequence[float], t: float) -> int:
    """The fault window time `t` falls in: the index of the last start ≤ t, or -1 before all.

    `starts` are the times faults were injected, non-decreasing; window i runs
    from fault i until fault i + 1 (the last one until the end).
    """
    return bisect.bisect_right(starts, t) - 1


@dataclass(frozen=True, slots=True)
class LastFault:
    """The fault injected last: its scheduled time, when it struck, checkpoints completed then."""

    scheduled: float
    struck: float
    completed: int


def may_strike(
    fault: Fault, last: LastFault | None, completed: int, now: float, patience: float
) -> bool:
    """Whether `fault` (due) may strike now, `completed` checkpoints having completed so far.

    Faults due at the same moment as the last one (a combination) go together;
    any other waits until the job completed a checkpoint since the last fault,
    so it hits a job that recovered and works, or until `patience` seconds
    passed (a job that completes nothing is hit all the same).
    """
    if last is None or fault.at == last.scheduled or completed > last.completed:
        return True
    return now - last.struck >= patience
