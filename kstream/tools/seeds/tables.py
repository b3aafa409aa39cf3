"""The seeds' tables and verdicts, pure: global snapshots of the ring and what they must hold.

A global snapshot of the ring (`kstream.examples.seed_ring`) has four
elements, as in seed 000's table: the processes p and q, and the channels
p→q and q→p. `TokenSnapshot` says where the token is in one global
snapshot and whether it is there exactly once; `BankSnapshot` holds the
balances and the credits in flight, whose total must equal the opening
total (seed 001). `overlapping` counts the snapshots p and q had in flight
together (seed 004).

The naive scheme (no markers) is run for real, not modelled:
`kstream.tools.seeds.naive` composes its global states from what the
processes recorded; they are `TokenSnapshot`s too.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kstream.protocol.checkpoint_history import CheckpointRecord

__all__ = [
    "BankSnapshot",
    "Element",
    "TokenSnapshot",
    "Verdict",
    "caught_in_flight",
    "overlapping",
    "q_cut_on",
]


class Element(enum.StrEnum):
    """The rows of seed 000's table."""

    P = "p"
    Q = "q"
    P_TO_Q = "p→q"
    Q_TO_P = "q→p"
    #: Not in the seed's table: p's source before p read the token from it (or a
    #: token in any other channel, which a correct run never records).
    ELSEWHERE = "elsewhere"


class Verdict(enum.StrEnum):
    ONCE = "token once"
    VANISHED = "token vanished"
    DOUBLED = "token doubled"


@dataclass(frozen=True, slots=True)
class TokenSnapshot:
    """Where one global snapshot of the token ring puts the token.

    `p_to_q` and `q_to_p` count tokens in the channels' recorded state;
    `elsewhere` counts tokens recorded in any other channel of the job (a
    source's or p's own; never one in a correct run, counted so that the
    verdict cannot miss one). `started_by`: the process whose source started
    it (``p``, ``q``; ``coordinator``; ``own clocks`` for the naive scheme);
    `q_cut`, `p_cut`, `injected`: how q and p joined it and which sources it
    was injected into (`kstream.tools.seeds.ring.RingSnapshot`).
    """

    label: str
    p_holds: bool
    q_holds: bool
    p_to_q: int = 0
    q_to_p: int = 0
    started_by: str = ""
    elsewhere: int = 0
    q_cut: str = ""
    p_cut: str = ""
    injected: str = ""

    @property
    def tokens(self) -> int:
        return int(self.p_holds) + int(self.q_holds) + self.p_to_q + self.q_to_p + self.elsewhere

    @property
    def verdict(self) -> Verdict:
        n = self.tokens
        return Verdict.ONCE if n == 1 else Verdict.VANISHED if n == 0 else Verdict.DOUBLED

    @property
    def in_channel_state(self) -> bool:
        """Whether the token is in a channel's recorded state (the snapshot caught it in flight)."""
        return self.p_to_q + self.q_to_p > 0

    def rows(self) -> list[tuple[Element, str]]:
        """Seed 000's table: element and state (s0/s1 for a process, token/empty for a channel)."""

        def channel(n: int) -> str:
            return "empty" if n == 0 else "token" if n == 1 else f"{n} tokens"

        rows = [
            (Element.P, "s1" if self.p_holds else "s0"),
            (Element.Q, "s1" if self.q_holds else "s0"),
            (Element.P_TO_Q, channel(self.p_to_q)),
            (Element.Q_TO_P, channel(self.q_to_p)),
        ]
        if self.elsewhere:
            rows.append((Element.ELSEWHERE, channel(self.elsewhere)))
        return rows


def q_cut_on(q_own_first: bool, q_marker_first: bool) -> str:
    """Which barrier q snapshotted on, read back from what it recorded.

    Whoever started the snapshot, both sources snapshot (the initiator, then
    the other on the coordinator's relay), so q may meet the snapshot first on
    its own source's barrier (`q_own_first`: unaligned, it then records p→q
    until p's marker comes) or first on p's marker (`q_marker_first`). Both is
    an aligned snapshot (q waited for both); neither: not known (the
    barriers' order could not be read back).
    """
    if q_own_first and q_marker_first:
        return "both, aligned"
    if q_own_first:
        return "own source"
    if q_marker_first:
        return "p's marker"
    return "unknown"


def caught_in_flight(snapshots: Iterable[TokenSnapshot]) -> dict[str, Counter[Element]]:
    """Per initiator (`TokenSnapshot.started_by`), in how many of its snapshots each
    channel's recorded state held the token; initiators that never caught it map
    to an empty counter."""
    out: dict[str, Counter[Element]] = {}
    for s in snapshots:
        caught = out.setdefault(s.started_by, Counter())
        for element, n in ((Element.P_TO_Q, s.p_to_q), (Element.Q_TO_P, s.q_to_p)):
            if n:
                caught[element] += 1
    return out


@dataclass(frozen=True, slots=True)
class BankSnapshot:
    """One global snapshot of the bank: balances per process and credits in flight.

    `balances`: process -> account -> balance (every account, untouched ones at
    their opening balance); `in_flight`: channel -> the credits ``(account,
    amount)`` its recorded state holds, in channel order; `started_by` and
    `q_cut`, `p_cut`, `injected` as in `TokenSnapshot`.
    """

    label: str
    balances: Mapping[str, Mapping[str, int]]
    in_flight: Mapping[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    started_by: str = ""
    q_cut: str = ""
    p_cut: str = ""
    injected: str = ""

    @property
    def held(self) -> int:
        return sum(sum(accounts.values()) for accounts in self.balances.values())

    @property
    def moving(self) -> int:
        return sum(amount for credits in self.in_flight.values() for _, amount in credits)

    @property
    def total(self) -> int:
        return self.held + self.moving

    @property
    def caught_in_flight(self) -> bool:
        """Whether a channel's recorded state holds a credit (seed 001's message M)."""
        return any(self.in_flight.values())

    def lines(self) -> list[str]:
        """The snapshot in seed 001's shape: each process's variables, then each channel."""
        out = [
            f"{process}: " + ", ".join(f"{a}={b}" for a, b in sorted(accounts.items()))
            for process, accounts in sorted(self.balances.items())
        ]
        for channel in (Element.P_TO_Q, Element.Q_TO_P):
            credits = self.in_flight.get(channel, ())
            shown = ", ".join(f"M(credit {a} {n})" for a, n in credits) or "empty"
            out.append(f"{channel}: {shown}")
        return out


def overlapping(records: list[CheckpointRecord]) -> int:
    """Pairs of completed checkpoints, one started by each of two different subtasks,
    that were in flight together: one started before the other completed (its
    trigger time plus its duration)."""
    done = [
        r
        for r in records
        if r.status == "completed" and r.started_by and r.triggered_at is not None
    ]
    pairs = 0
    for i, a in enumerate(done):
        for b in done[i + 1 :]:
            if a.started_by == b.started_by:
                continue
            a0, b0 = a.triggered_at or 0.0, b.triggered_at or 0.0
            a1, b1 = a0 + (a.duration_s or 0.0), b0 + (b.duration_s or 0.0)
            pairs += a0 < b1 and b0 < a1
    return pairs
