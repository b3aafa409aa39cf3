"""`kstream demo token-ring`: seed 000's token ring on a real job, checked snapshot by snapshot.

`token_ring_demo` runs the ring of `kstream.examples.seed_ring.token_ring`
(`kstream.tools.seeds.demos.run_ring`) and reads each completed checkpoint as
seed 000's table (`token_snapshot`): the token must be in exactly one place.

`token_ring_demo(naive=True)` runs seed 000's naive scheme instead: no
checkpoints at all (no barrier, no marker), each process recording its own
state and input channel on its own clock (`kstream.tools.seeds.naive`); the
global states are composed from those records and the channel topics.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kstream.dataflow.plan import plan
from kstream.errors import ConfigurationError, JobFailedError
from kstream.examples.seed_ring import TOKEN_KEY, WORKERS, P, Q, token_ring
from kstream.infra.admin import Admin
from kstream.infra.cluster import bootstrap_servers
from kstream.infra.paths import cache_dir
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.channels.format import BatchFormat
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, unique_name
from kstream.tools.demo import progress_bar
from kstream.tools.seeds.demos import (
    DEMO_TIMEOUT_S,
    Initiator,
    Say,
    clean_up,
    note_pids,
    run_ring,
)
from kstream.tools.seeds.naive import (
    NaiveSnapshot,
    channel_messages,
    compose,
    load_records,
    naive_token_ring,
    recording_ticks,
    records_dir,
)
from kstream.tools.seeds.ring import RingLayout, RingSnapshot
from kstream.tools.seeds.tables import Element, TokenSnapshot, Verdict, caught_in_flight

__all__ = ["TokenRingOutcome", "token_events", "token_ring_demo", "token_snapshot"]

#: The naive run's checkpoint interval: longer than any run, so the coordinator
#: never triggers one (the naive scheme has no markers).
NO_CHECKPOINTS_S = 1e9
#: The naive scheme's processes record every this many of their own ticks, on average.
NAIVE_EVERY = 4


def _tokens(values: list[Any]) -> int:
    # ``"token"`` as p's source wrote it (still in p's input channel: a snapshot
    # that reached p through the loop first records that channel), ``["token", hop]``
    # once a process passed it on.
    return sum(1 for v in values if v == "token" or (isinstance(v, list) and v[:1] == ["token"]))


def token_snapshot(s: RingSnapshot) -> TokenSnapshot:
    """Where checkpoint `s` puts the token."""
    # Before p read its source's first record the token is still in that source.
    # (A negative offset is Kafka's "from the beginning": nothing read yet.)
    elsewhere = int(s.p_source_offset < 1) + sum(
        _tokens(v) for e, v in s.channels.items() if e not in (Element.P_TO_Q, Element.Q_TO_P)
    )
    return TokenSnapshot(
        f"chk {s.checkpoint}",
        p_holds=TOKEN_KEY in s.p_state,
        q_holds=TOKEN_KEY in s.q_state,
        p_to_q=_tokens(s.channels.get(Element.P_TO_Q, [])),
        q_to_p=_tokens(s.channels.get(Element.Q_TO_P, [])),
        started_by=s.started_by,
        elsewhere=elsewhere,
        q_cut=s.q_cut,
        p_cut=s.p_cut,
        injected=s.injected,
    )


def token_events(s: RingSnapshot) -> int:
    """How many events of the token's chain (`kstream.tools.seeds.tables`) happened by `s`."""
    for state in (s.p_state, s.q_state):
        if TOKEN_KEY in state:
            return 2 * int(state[TOKEN_KEY][0]) + 1  # hop h received: events 0..2h
    hops = [int(v[1]) for vs in s.channels.values() for v in vs if isinstance(v, list)]
    return 2 * max(hops) if hops else 0  # hop h sent, not received: events 0..2h-1


@dataclass
class TokenRingOutcome:
    snapshots: list[TokenSnapshot]
    naive: bool
    seconds: float
    kills: int
    recoveries: int
    #: Events of the token's chain in the run (hops sent and received).
    events: int
    verdicts: Counter[Verdict] = field(default_factory=Counter)
    #: Per process (p, q): the pids of the worker processes that ran it, in order.
    pids: dict[str, list[int]] = field(default_factory=dict)
    #: Naive: the global states `snapshots` shows, with the records and messages
    #: each was composed from; `records`: the checkpoint storage holding the records.
    naive_rows: list[NaiveSnapshot] = field(default_factory=list)
    records: Path | None = None
    #: Pairs of p's and q's completed snapshots that overlapped (`RingRun.overlapping`).
    overlapping: int = 0
    #: Checkpoints aborted during the run.
    aborted: int = 0

    @property
    def in_flight(self) -> int:
        """Snapshots whose recorded channel state holds the token."""
        return sum(1 for s in self.snapshots if s.in_channel_state)

    @property
    def ok(self) -> bool:
        """Every global snapshot holds the token once (naive too: there it usually does not)."""
        return bool(self.snapshots) and self.verdicts[Verdict.ONCE] == len(self.snapshots)


def token_ring_demo(
    *,
    ticks: int,
    rate: float,
    alignment: Alignment,
    naive: bool,
    kills: int,
    seed: int,
    interval: float,
    bootstrap: str | None,
    say: Say,
    console: Console,
    initiator: Initiator = Initiator.BOTH,
    concurrent: bool = False,
) -> TokenRingOutcome:
    """Pass the token around p and q for `ticks` ticks of each process; check every snapshot.

    With `concurrent` (seed 004), p and q start snapshots independently rather
    than by turns, up to `kstream.tools.seeds.demos.CONCURRENT_IN_FLIGHT` in flight;
    overlapping ones (`TokenRingOutcome.overlapping`) both complete.

    With `naive`, the job runs without checkpoints and `alignment`,
    `initiator`, `interval`, `concurrent` do not apply: p and q record themselves on their
    own clocks (`kstream.tools.seeds.naive`), every `NAIVE_EVERY` of their
    ticks on average, and the global states are composed from those records
    (`_naive_token_ring`). `kills` must then be 0: nothing could be restored.
    """
    if naive:
        if kills:
            raise ConfigurationError(
                f"--naive runs without checkpoints, so a kill could not be recovered: "
                f"use --kill 0, got --kill {kills}"
            )
        return _naive_token_ring(
            ticks=ticks, rate=rate, seed=seed, bootstrap=bootstrap, say=say, console=console
        )
    run = run_ring(
        token_ring,
        "kstream.examples.seed_ring:token_ring",
        p_values=["token"] + ["tick"] * ticks,
        q_values=["tick"] * ticks,
        rate=rate,
        alignment=alignment,
        initiator=initiator,
        kills=kills,
        seed=seed,
        interval=interval,
        bootstrap=bootstrap,
        say=say,
        console=console,
        concurrent=concurrent,
    )
    events = token_events(run.snapshots[-1]) if run.snapshots else 0
    snapshots = [token_snapshot(s) for s in run.snapshots]
    outcome = TokenRingOutcome(
        snapshots,
        naive,
        run.seconds,
        run.kills,
        run.recoveries,
        events,
        Counter(s.verdict for s in snapshots),
        run.pids,
        overlapping=run.overlapping,
        aborted=run.aborted,
    )
    _print_token_ring(outcome, alignment, console)
    clean_up(run, outcome.ok, say)
    return outcome


def _channel_param(channel: tuple[str, int]) -> str:
    return f"{channel[0]}:{channel[1]}"


def _naive_token_ring(
    *, ticks: int, rate: float, seed: int, bootstrap: str | None, say: Say, console: Console
) -> TokenRingOutcome:
    """Seed 000's naive scheme on the real ring: no checkpoint, no barrier, no marker.

    p and q run on two workers; each records its state and its input channel's
    offsets on its own clock into the run's checkpoint storage
    (`kstream.tools.seeds.naive.Recorder`). Once both made all their records,
    the global states are composed from them and from the channel topics
    (`kstream.tools.seeds.naive.compose`). The records are kept: every row
    can be traced back to them.
    """
    servers = bootstrap_servers(bootstrap, say)
    admin = Admin(servers)
    admin.check_reachable()
    run_id = unique_name("token-ring-naive")
    p_topic, q_topic = f"{run_id}-p", f"{run_id}-q"
    admin.create_topics({p_topic: 1, q_topic: 1})
    values = {P: ["token"] + ["tick"] * ticks, Q: ["tick"] * ticks}
    feeders = [
        Feeder(servers, topic, [json.dumps(v).encode() for v in values[process]], 1, rate)
        for process, topic in ((P, p_topic), (Q, q_topic))
    ]
    state_dir = cache_dir() / "demo" / run_id
    params = {"p-input": p_topic, "q-input": q_topic, "name": run_id, "seed": str(seed)}
    # The channel topics the processes record: the job's own, named by its plan.
    layout = RingLayout.of(plan(token_ring(params), WORKERS))
    root = state_dir.resolve() / run_id / "checkpoints"
    params |= {
        "naive-records": str(root),
        "naive-every": str(NAIVE_EVERY),
        "bootstrap": servers,
        f"naive-{P}-input": _channel_param(layout.q_to_p),
        f"naive-{Q}-input": _channel_param(layout.p_to_q),
    }
    runner = Runner(
        RunConfig(
            JobRef("kstream.tools.seeds.naive:naive_token_ring", params),
            servers,
            WORKERS,
            state_dir,
            checkpoints=CoordinatorConfig(interval=NO_CHECKPOINTS_S, timeout=60.0),
            # The ring has no sink, so no transaction: none has to outlive an interval
            # that never ends (exactly-once would size the sinks' transactions by it).
            guarantee="at-least-once",
        ),
        naive_token_ring(params),
        say=say,
    )
    assert runner.storage.location == str(root)  # the storage the real snapshots would use
    due = {process: len(recording_ticks(seed, process, NAIVE_EVERY, ticks)) for process in values}
    if not all(due.values()):
        raise ConfigurationError(
            f"--ticks {ticks} is too few for the naive scheme's clocks to record: use "
            f"--ticks {2 * NAIVE_EVERY} or more"
        )
    runner.prepare()
    say(
        f"ring {run_id}: {ticks} ticks for p and for q at {rate:g}/s each, no checkpoints; "
        f"p and q record themselves on their own clocks ({due[P]} and {due[Q]} records)"
    )
    pids: dict[str, list[int]] = {P: [], Q: []}
    started = time.monotonic()
    running = runner.start()
    try:
        with progress_bar(console, "local records") as progress:
            bar = progress.add_task("ring", total=sum(due.values()))
            while True:
                running.step()
                for f in feeders:
                    if running.running:
                        f.feed()
                    else:
                        f.hold()
                note_pids(running, pids)
                if runner.stats.recoveries:
                    raise JobFailedError(
                        "a worker of the naive run was restarted; without checkpoints its "
                        f"records start over: run it again (worker logs in {state_dir})"
                    )
                made = {p: len(list(records_dir(root, p).glob("*.json"))) for p in due}
                progress.update(bar, completed=sum(made.values()))
                if all(made[p] >= due[p] for p in due):
                    break
                if time.monotonic() - started > DEMO_TIMEOUT_S:
                    raise TimeoutError(
                        f"the naive run made {made} of its {due} records within "
                        f"{DEMO_TIMEOUT_S:.0f}s"
                    )
    finally:
        running.stop()
    seconds = time.monotonic() - started
    fmt = BatchFormat(layout.plan.job.channel_serde)
    p_records, q_records = load_records(root, P), load_records(root, Q)
    say(
        f"composing {min(len(p_records), len(q_records))} global states from "
        f"{records_dir(root, P).parent} and the channel topics"
    )
    rows = compose(
        p_records,
        q_records,
        channel_messages(servers, layout.p_to_q, fmt, layout.keyed[layout.p_to_q]),
        channel_messages(servers, layout.q_to_p, fmt, layout.keyed[layout.q_to_p]),
    )
    snapshots = [r.snapshot for r in rows]
    hops = p_records[-1].sent + q_records[-1].sent
    outcome = TokenRingOutcome(
        snapshots,
        True,
        seconds,
        0,
        runner.stats.recoveries,
        2 * hops,
        Counter(s.verdict for s in snapshots),
        pids,
        rows,
        root,
    )
    _print_naive(outcome, console)
    say(f"the local records are kept in {records_dir(root, P).parent}")
    return outcome


def _queue_cell(n: int, consumed: int, end: int) -> str:
    """A channel as its receiver recorded it: tokens, then (messages consumed/end offset)."""
    state = "empty" if n == 0 else "token" if n == 1 else f"{n} tokens"
    return f"{state} ({consumed}/{end})"


def _print_naive(o: TokenRingOutcome, console: Console) -> None:
    """The naive scheme's global states, each with the offsets it was composed from."""
    table = Table(
        title="token ring, naive: no markers, each process records itself on its own clock: "
        "one row per global state (p's i-th record with q's i-th)"
    )
    columns = (
        "global state",
        "p at tick (sent)",
        "q at tick (sent)",
        "p",
        "q",
        "p→q (q: consumed/end)",
        "q→p (p: consumed/end)",
        "verdict",
    )
    for column in columns:
        table.add_column(column)
    for row in o.naive_rows:
        s = row.snapshot
        table.add_row(
            s.label,
            f"{row.p.tick} (sent {row.p.sent})",
            f"{row.q.tick} (sent {row.q.sent})",
            "s1" if s.p_holds else "s0",
            "s1" if s.q_holds else "s0",
            _queue_cell(s.p_to_q, row.q.consumed, row.q.end),
            _queue_cell(s.q_to_p, row.p.consumed, row.p.end),
            s.verdict,
            style="" if s.verdict is Verdict.ONCE else "bold red",
        )
    console.print(table)
    example = next((r for r in o.naive_rows if r.snapshot.verdict is not Verdict.ONCE), None)
    if example is not None:
        s = example.snapshot
        console.print(f"[bold]{s.label}[/bold] as in seed 000 ({s.verdict}):")
        seed = Table()
        seed.add_column("element")
        seed.add_column("state")
        for element, state in s.rows():
            seed.add_row(str(element), state)
        console.print(seed)
        for who, r, channel in ((P, example.p, "q→p"), (Q, example.q, "p→q")):
            console.print(
                f"  {who} recorded at its tick {r.tick} (pid {r.pid}): "
                f"{'s1' if r.holds else 's0'}, sent {r.sent}; of its input {channel} it had "
                f"consumed {r.consumed}, and the channel ended at offset {r.end}",
                highlight=False,
            )
    summary = Table(title="kstream token ring demo, naive scheme", show_header=False)
    summary.add_row("run", f"{o.seconds:.1f} s, {o.events // 2} hops by the last records")
    summary.add_row(
        "processes",
        ", ".join(f"{who}: pid {', '.join(map(str, o.pids.get(who, [])))}" for who in (P, Q)),
    )
    failed = len(o.snapshots) - o.verdicts[Verdict.ONCE]
    summary.add_row(
        "global states",
        f"{len(o.snapshots)}: " + ", ".join(f"{o.verdicts[v]} {v}" for v in Verdict),
    )
    summary.add_row(
        "verdict",
        f"the naive scheme lost or doubled the token in {failed} of {len(o.snapshots)} "
        "global states, as seed 000 says it can"
        if failed
        else "the naive scheme happened to keep the token once in every global state of this run",
    )
    console.print(summary)


def _print_token_ring(o: TokenRingOutcome, alignment: Alignment, console: Console) -> None:
    scheme = "naive: no markers, each process on its own clock" if o.naive else alignment.value
    table = Table(title=f"token ring, {scheme}: one row per global snapshot")
    # The "elsewhere" column only when a snapshot has the token there.
    elements = [
        e for e in Element if e != Element.ELSEWHERE or any(s.elsewhere for s in o.snapshots)
    ]
    # Which barrier q cut on says something only when it does not wait for both.
    # p cut on (its loop head): its own source's barrier or q's marker; injected:
    # the sources the snapshot reached through the control topic, no channel.
    q_cut = (
        ["p cut on", "q cut on", "injected"]
        if alignment is Alignment.UNALIGNED and not o.naive
        else []
    )
    for column in ("snapshot", "started by", *q_cut, *elements, "verdict"):
        table.add_column(str(column))
    for s in o.snapshots:
        style = "" if s.verdict is Verdict.ONCE else "bold red"
        states = dict(s.rows())
        table.add_row(
            s.label,
            s.started_by,
            *([s.p_cut, s.q_cut, s.injected] if q_cut else []),
            *(states.get(e, "") for e in elements),
            s.verdict,
            style=style,
        )
    console.print(table)
    example = next((s for s in o.snapshots if s.verdict is not Verdict.ONCE), None)
    if example is None:
        example = next((s for s in o.snapshots if s.in_channel_state), None)
    if example is not None:
        console.print(f"[bold]{example.label}[/bold] as in seed 000 ({example.verdict}):")
        seed = Table()
        seed.add_column("element")
        seed.add_column("state")
        for element, state in example.rows():
            seed.add_row(str(element), state)
        console.print(seed)
    summary = Table(title="kstream token ring demo", show_header=False)
    summary.add_row("run", f"{o.seconds:.1f} s, {o.events} token events (hops sent and received)")
    summary.add_row("faults", f"{o.kills} worker SIGKILLed, {o.recoveries} recoveries")
    summary.add_row(
        "snapshots",
        f"{len(o.snapshots)}: "
        + ", ".join(f"{o.verdicts[v]} {v}" for v in Verdict)
        + f"; {o.in_flight} caught the token in recorded channel state",
    )
    if not o.naive:
        started = Counter(s.started_by for s in o.snapshots)
        caught = caught_in_flight(o.snapshots)
        summary.add_row(
            "started by",
            "; ".join(f"{who}: {n}, {_caught(caught[who])}" for who, n in sorted(started.items())),
        )
        summary.add_row(
            "overlapping",
            f"{o.overlapping} pairs of p's and q's snapshots in flight together, both "
            f"completed; {o.aborted} aborted in the run",
        )
    verdict = "the token is exactly once in every snapshot" if o.ok else "VERIFICATION FAILED"
    summary.add_row("verdict", verdict)
    console.print(summary)


def _caught(channels: Counter[Element]) -> str:
    """``"2 caught the token in flight (p→q 1, q→p 1)"``: one initiator's catches."""
    n = sum(channels.values())
    if not n:
        return "none caught the token in flight"
    where = ", ".join(f"{e} {k}" for e, k in sorted(channels.items()))
    return f"{n} caught the token in flight ({where})"
