"""What the seeds' demos share: running a ring of `kstream.examples.seed_ring` on Kafka.

`kstream demo token-ring` (`kstream.tools.seeds.token_ring`) and `kstream demo
bank` (`kstream.tools.seeds.bank`) both run a ring with two workers, p's stages
on one and q's on the other (two OS processes, as in the seeds), retain every
checkpoint of the run, optionally SIGKILL one of the two mid-run (one process
crashing), then read each completed checkpoint back
(`kstream.tools.seeds.ring`): `run_ring` does that and returns a `RingRun`;
each demo checks the property its seed states on it.

Who starts the snapshots is `Initiator`: by default p and q both, taking
turns, each on its own seeded clock. The demo marks some records of each
process's input (`kstream.examples.seed_ring.REQUEST`, `mark_requests`);
reading one, the process's source stage calls `kstream.request_snapshot()`
and its source subtask starts a snapshot, which the coordinator relays to
the other source. Marking records rather than giving each source a
`snapshot_every_ms` keeps each process's clock its own ticks, seeded and the
same on every replay, and lets the two take turns instead of starting
snapshots together (where one aborts the other). The coordinator's own
interval is then only a fallback (`FALLBACK_INTERVAL_S`). Who started each
snapshot is read from the control topic (`Initiated.task`,
`CheckpointRecord.started_by`), not inferred.
"""

from __future__ import annotations

import enum
import json
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from kstream.dataflow.job import Job
from kstream.errors import ConfigurationError
from kstream.examples.seed_ring import P_WORKER, Q_WORKER, REQUEST, WORKERS, P, Q
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.infra.paths import cache_dir
from kstream.protocol.barrier import Alignment
from kstream.protocol.checkpoint_history import checkpoint_history
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.control import read_messages
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import Feeder, run_until_consumed, unique_name
from kstream.tools.demo import progress_bar
from kstream.tools.seeds.ring import RingLayout, RingSnapshot, read_snapshots
from kstream.tools.seeds.tables import overlapping

__all__ = [
    "DEMO_TIMEOUT_S",
    "Initiator",
    "RingRun",
    "Say",
    "clean_up",
    "mark_requests",
    "note_pids",
    "run_ring",
]

Say = Callable[[str], None]
#: The demos give up if the ring has not processed its sources within this time.
DEMO_TIMEOUT_S = 300.0
#: Retain every checkpoint of a demo run: the demo reads them all back afterwards.
RETAIN_ALL = 1_000_000
#: A kill waits for this checkpoint, so the run has snapshots before and after it.
KILL_AFTER = 3
#: The coordinator's own interval while the processes start the snapshots: a
#: fallback, reached only once p and q went quiet for that long (every snapshot
#: a source starts restarts it): after their last records, the run still needs
#: a checkpoint covering every record read. Longer than a loaded machine takes
#: to start the worker, so that the first snapshots are the processes' own.
FALLBACK_INTERVAL_S = 5.0
#: Snapshots in flight at once. When p and q start one at the same moment, the
#: larger id survives (the other's source declines the smaller one) rather than
#: the in-flight limit aborting it too.
IN_FLIGHT = 2
#: Snapshots in flight at once with ``--concurrent`` (seed 004): p's and q's
#: overlap, and each completes.
CONCURRENT_IN_FLIGHT = 4


class Initiator(enum.StrEnum):
    """Who starts a demo's snapshots."""

    P = P
    Q = Q
    #: p and q, each on its own clock.
    BOTH = "both"
    #: The coordinator's interval, into both sources at once.
    COORDINATOR = "coordinator"

    @classmethod
    def parse(cls, text: str) -> Initiator:
        """The initiator named `text`; a `ConfigurationError` naming the choices otherwise."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(i.value for i in cls)
            raise ConfigurationError(
                f"--initiator must be one of {choices}, got {text!r}"
            ) from None

    def starts(self, process: str) -> bool:
        """Whether `process` (p or q) starts snapshots itself."""
        return self is Initiator.BOTH or self.value == process


def mark_requests(
    values: list[Any], every: float, seed: int, process: str, turn: int = 0, turns: int = 1
) -> list[Any]:
    """`values` with some wrapped as ``{REQUEST: v}``: `process`'s snapshot requests.

    The input is cut into turns of `every` records (at least 2); `process`
    requests once in each turn t with ``t % turns == turn``, at a seeded record
    of the turn's first half (never the input's first record, the token ring's
    token). Two processes that both feed records at one rate and take turns
    (turns=2) request half a turn apart at least, each on its own clock.
    """
    rnd = random.Random(f"{seed}-{process}-requests")
    size = max(2, round(every))
    out = list(values)
    for start in range(turn * size, len(out), turns * size):
        at = start + 1 + rnd.randrange(size // 2)
        if at < len(out):
            out[at] = {REQUEST: out[at]}
    return out


@dataclass(frozen=True)
class RingRun:
    """What running a ring produced: its checkpoints read back, and what happened."""

    snapshots: list[RingSnapshot]
    seconds: float
    kills: int
    recoveries: int
    aborted: int
    #: The run's state and checkpoints (`_clean_up` deletes them).
    state_dir: Path
    #: Per process (p, q): the pids of the worker processes that ran it, in order.
    pids: dict[str, list[int]] = field(default_factory=dict)
    #: Pairs of completed snapshots, one started by p and one by q, that were in
    #: flight at the same time (`overlapping`).
    overlapping: int = 0


def _trigger(initiator: Initiator, interval: float, concurrent: bool) -> CoordinatorConfig:
    """The coordinator's part in starting snapshots: its interval only when it is
    the initiator, else the fallback (the processes' requests: `mark_requests`)."""
    if initiator is Initiator.COORDINATOR:
        return CoordinatorConfig(interval=interval, timeout=60.0, retained=RETAIN_ALL)
    return CoordinatorConfig(
        interval=max(interval, FALLBACK_INTERVAL_S),
        timeout=60.0,
        max_in_flight=CONCURRENT_IN_FLIGHT if concurrent else IN_FLIGHT,
        retained=RETAIN_ALL,
        concurrent=concurrent,
    )


def run_ring(
    job_fn: Callable[[dict[str, str]], Job],
    spec: str,
    *,
    p_values: list[Any],
    q_values: list[Any],
    rate: float,
    alignment: Alignment,
    initiator: Initiator,
    kills: int,
    seed: int,
    interval: float,
    bootstrap: str | None,
    say: Say,
    console: Console,
    concurrent: bool = False,
) -> RingRun:
    if concurrent and (alignment is not Alignment.UNALIGNED or initiator is not Initiator.BOTH):
        raise ConfigurationError(
            "--concurrent needs --alignment unaligned and --initiator both "
            "(aligned, a subtask aligns one snapshot at a time, so they serialise)"
        )
    servers = bootstrap_servers(bootstrap, say)
    admin = Admin(servers)
    admin.check_reachable()
    run_id = unique_name(spec.rsplit(":", 1)[1].replace("_", "-"))
    p_topic, q_topic = f"{run_id}-p", f"{run_id}-q"
    admin.create_topics({p_topic: 1, q_topic: 1})
    # One request every `interval` seconds of ticks; with both initiators p and q
    # take turns. Two snapshots started at the same moment would race (the larger
    # id survives, p's or q's by turns on equal sequences, and the other is lost):
    # turns keep p's and q's apart, so each process's snapshots complete.
    # Concurrent (seed 004): no turns, each requests once per interval on its own clock.
    both = initiator is Initiator.BOTH and not concurrent
    inputs = {
        process: mark_requests(
            values, interval * rate, seed, process, turn=int(both and process == Q), turns=1 + both
        )
        if initiator.starts(process)
        else values
        for process, values in ((P, p_values), (Q, q_values))
    }
    feeders = [
        Feeder(servers, topic, [json.dumps(v).encode() for v in inputs[process]], 1, rate)
        for process, topic in ((P, p_topic), (Q, q_topic))
    ]
    params = {"p-input": p_topic, "q-input": q_topic, "name": run_id, "seed": str(seed)}
    state_dir = cache_dir() / "demo" / run_id
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            servers,
            WORKERS,  # p's stages on one, q's on the other: a kill crashes one
            state_dir,
            checkpoints=_trigger(initiator, interval, concurrent),
            alignment=alignment,
        ),
        job_fn(params),
        say=say,
    )
    runner.prepare()
    who = {
        Initiator.BOTH: "started by p and by q, each on its own clock"
        + (", concurrently" if concurrent else ", by turns"),
        Initiator.COORDINATOR: "started by the coordinator",
    }.get(initiator, f"started by {initiator.value}")
    say(
        f"ring {run_id}: {len(p_values)} records for p, {len(q_values)} for q at {rate:g}/s each, "
        f"{alignment.value} snapshots every {interval:g} s, {who}"
    )

    pids: dict[str, list[int]] = {P: [], Q: []}
    started_job: list[RunningJob] = []

    def feed(r: RunningJob) -> None:
        # Input flows only while the workers run: the token moves on its holder's
        # own ticks, and ticks written while a worker starts or restores would be
        # read in one go, leaving the token with a holder that has no ticks left.
        for f in feeders:
            if r.running:
                f.feed()
            else:
                f.hold()
        note_pids(r, pids)
        # What the run completed is read from the coordinator once it stopped.
        started_job[:] = [r]

    started = time.monotonic()
    with progress_bar(console, "of p's records") as progress:
        bar = progress.add_task("ring", total=len(p_values))
        done_kills = run_until_consumed(
            runner,
            p_topic,
            feeders[0].ends,
            also={q_topic: feeders[1].ends},
            kills=kills,
            kill_after=KILL_AFTER,
            seed=seed,
            say=say,
            chaos=feed,
            on_progress=lambda done: progress.update(bar, completed=done),
            timeout=DEMO_TIMEOUT_S,
        )
    seconds = time.monotonic() - started
    completed = [n for job in started_job for n in job.coordinator.completed]
    say(f"reading back {len(completed)} completed checkpoints (state and recorded channel state)")
    # Who started each: the control topic's record of it (`Initiated.task`).
    history = checkpoint_history(read_messages(servers, run_id))
    started_by = {r.checkpoint: r.started_by for r in history}
    # How each subtask joined each snapshot: its ack's record (`Acked.cut_on`).
    cuts = {r.checkpoint: dict(r.cuts) for r in history}
    snapshots = read_snapshots(
        RingLayout.of(runner.plan), runner.storage, servers, completed, alignment, started_by, cuts
    )
    return RingRun(
        snapshots,
        seconds,
        done_kills,
        runner.stats.recoveries,
        runner.report.aborted,
        state_dir,
        pids,
        overlapping(history),
    )


def note_pids(runner: RunningJob, pids: dict[str, list[int]]) -> None:
    """Add the pids of the workers running p and q now to `pids` (process -> pids seen)."""
    running = runner.worker_pids()
    for process, worker in ((P, P_WORKER), (Q, Q_WORKER)):
        pid = running.get(worker)
        if pid is not None and (not pids[process] or pids[process][-1] != pid):
            pids[process].append(pid)


def clean_up(run: RingRun, ok: bool, say: Say) -> None:
    """Delete the run's state and checkpoints, or keep them when a verification failed."""
    if ok:
        shutil.rmtree(run.state_dir, ignore_errors=True)
    else:
        say(f"checkpoints kept for inspection in {run.state_dir}")
