"""`kstream demo bank`: seed 001's two banks on a real job, every snapshot's total checked.

`bank_demo` runs the ring of `kstream.examples.seed_ring.bank`
(`kstream.tools.seeds.demos.run_ring`): payments cross between P1's accounts
(p) and P2's (q). Each completed checkpoint is read as seed 001's picture
(`bank_snapshot`): balances plus the credits recorded in flight must add up to
the money the accounts opened with.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from kstream.examples.seed_ring import ACCOUNTS, OPENING_BALANCE, P, Q, bank
from kstream.protocol.barrier import Alignment
from kstream.tools.seeds.demos import Initiator, Say, clean_up, run_ring
from kstream.tools.seeds.ring import RingSnapshot
from kstream.tools.seeds.tables import BankSnapshot

__all__ = ["BankOutcome", "bank_demo", "bank_snapshot", "payments"]


def payments(n: int, payer: str, seed: int) -> list[list[Any]]:
    """`n` seeded payments from `payer`'s accounts to the other process's."""
    rnd = random.Random(f"{seed}-{payer}")
    other = Q if payer == P else P
    return [
        ["pay", rnd.choice(ACCOUNTS[payer]), rnd.choice(ACCOUNTS[other]), rnd.randint(1, 200)]
        for _ in range(n)
    ]


def bank_snapshot(s: RingSnapshot) -> BankSnapshot:
    """The balances and credits in flight of checkpoint `s`; untouched accounts at opening."""
    balances = {
        f"{name} ({process})": {a: int(state.get(a, OPENING_BALANCE)) for a in ACCOUNTS[process]}
        for name, process, state in (("P1", P, s.p_state), ("P2", Q, s.q_state))
    }
    in_flight = {
        element: tuple((str(v[1]), int(v[2])) for v in values if v[:1] == ["credit"])
        for element, values in s.channels.items()
    }
    return BankSnapshot(
        f"chk {s.checkpoint}", balances, in_flight, s.started_by, s.q_cut, s.p_cut, s.injected
    )


@dataclass
class BankOutcome:
    snapshots: list[BankSnapshot]
    expected_total: int
    seconds: float
    kills: int
    recoveries: int
    #: Per process (p, q): the pids of the worker processes that ran it, in order.
    pids: dict[str, list[int]] = field(default_factory=dict)

    @property
    def wrong(self) -> list[BankSnapshot]:
        return [s for s in self.snapshots if s.total != self.expected_total]

    @property
    def in_flight(self) -> int:
        return sum(1 for s in self.snapshots if s.caught_in_flight)

    @property
    def ok(self) -> bool:
        return bool(self.snapshots) and not self.wrong


def bank_demo(
    *,
    transfers: int,
    rate: float,
    alignment: Alignment,
    kills: int,
    seed: int,
    interval: float,
    bootstrap: str | None,
    say: Say,
    console: Console,
    initiator: Initiator = Initiator.BOTH,
) -> BankOutcome:
    """`transfers` payments each way between P1 (p) and P2 (q); check every snapshot's total."""
    run = run_ring(
        bank,
        "kstream.examples.seed_ring:bank",
        p_values=payments(transfers, P, seed),
        q_values=payments(transfers, Q, seed),
        rate=rate,
        alignment=alignment,
        initiator=initiator,
        kills=kills,
        seed=seed,
        interval=interval,
        bootstrap=bootstrap,
        say=say,
        console=console,
    )
    expected = OPENING_BALANCE * sum(len(a) for a in ACCOUNTS.values())
    outcome = BankOutcome(
        [bank_snapshot(s) for s in run.snapshots],
        expected,
        run.seconds,
        run.kills,
        run.recoveries,
        run.pids,
    )
    _print_bank(outcome, console)
    clean_up(run, outcome.ok, say)
    return outcome


def _print_bank(o: BankOutcome, console: Console) -> None:
    table = Table(title="bank: one row per global snapshot")
    for column in (
        "snapshot",
        "started by",
        "p cut on",
        "q cut on",
        "injected",
        "in accounts",
        "in flight",
        "total",
    ):
        table.add_column(column)
    for s in o.snapshots:
        style = "" if s.total == o.expected_total else "bold red"
        table.add_row(
            s.label,
            s.started_by,
            s.p_cut,
            s.q_cut,
            s.injected,
            f"{s.held:,}",
            f"{s.moving:,}",
            f"{s.total:,}",
            style=style,
        )
    console.print(table)
    shown = next((s for s in o.snapshots if s.caught_in_flight), None) or (
        o.snapshots[-1] if o.snapshots else None
    )
    if shown is not None:
        caught = ", credits caught in flight as seed 001's M" if shown.caught_in_flight else ""
        console.print(f"[bold]{shown.label}[/bold] in seed 001's shape{caught}:", highlight=False)
        for line in shown.lines():
            console.print(f"  {line}", highlight=False)
    summary = Table(title="kstream bank demo", show_header=False)
    summary.add_row("run", f"{o.seconds:.1f} s")
    summary.add_row("faults", f"{o.kills} worker SIGKILLed, {o.recoveries} recoveries")
    summary.add_row(
        "snapshots",
        f"{len(o.snapshots)}, {o.in_flight} with credits in recorded channel state",
    )
    started = Counter(s.started_by for s in o.snapshots)
    catches = Counter(s.started_by for s in o.snapshots if s.caught_in_flight)
    summary.add_row(
        "started by",
        "; ".join(
            f"{who}: {n}, {catches[who]} with credits in flight"
            for who, n in sorted(started.items())
        ),
    )
    summary.add_row(
        "verdict",
        f"every snapshot's total is {o.expected_total:,}"
        if o.ok
        else f"VERIFICATION FAILED: {len(o.wrong)} snapshots with a wrong total",
    )
    console.print(summary)
