"""The seeds' tables and verdicts, pure: global snapshots of the ring and what they must hold.

A global snapshot of the ring (`kstream.examples.seed_ring`) has four
elements, as in seed 000's table: the processes p and q, and the channels
p→q and q→p. `TokenSnapshot` says where the token is in one global
snapshot and whether it is there exactly once; `BankSnapshot` holds the
balances and the credits in flight, whose total must equal the opening
total (seed 001).

The naive scheme (no markers) is modelled here too. The token is the only
thing in the ring that moves, so the run's token events form one causal
chain, numbered from 0::

    event 0           p receives the token (hop 0, injected by p's source)
    event 2h - 1      hop h is sent: by p for an odd h (into p→q), by q for an even h
    event 2h          hop h is received

"Just after event e" is a moment of the run whose global state is exact:
`location(e)` holds the token. Without markers, each process records its
own state and its own input channel (what was sent to it and not yet
received) when its own clock says so; two clocks never agree exactly, so p
records at one moment and q at another. `naive_snapshot(p_at, q_at)` is
the global state so composed; it holds the token exactly once only when
both moments hold it in the same place, which is what seed 000 shows.
"""

from __future__ import annotations

import enum
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "BankSnapshot",
    "Element",
    "TokenSnapshot",
    "Verdict",
    "caught_in_flight",
    "location",
    "naive_schedule",
    "naive_snapshot",
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


def location(event: int) -> Element:
    """Where the token is just after event `event` (>= 0) of the token's chain."""
    if event < 0:
        raise ValueError(f"the token's chain starts at event 0, got {event}")
    hop = (event + 1) // 2
    if event % 2 == 0:  # hop received: at p for an even hop, at q for an odd one
        return Element.P if hop % 2 == 0 else Element.Q
    return Element.P_TO_Q if hop % 2 == 1 else Element.Q_TO_P


def naive_snapshot(label: str, p_at: int, q_at: int) -> TokenSnapshot:
    """The global state the naive scheme records when p records just after chain event
    `p_at` (its state and its input q→p) and q just after `q_at` (its state and p→q)."""
    p_sees, q_sees = location(p_at), location(q_at)
    return TokenSnapshot(
        label,
        p_holds=p_sees is Element.P,
        q_holds=q_sees is Element.Q,
        p_to_q=int(q_sees is Element.P_TO_Q),
        q_to_p=int(p_sees is Element.Q_TO_P),
        started_by="own clocks",
    )


#: How far (in token events) the two processes' clocks disagree at most.
MAX_SKEW = 2


def naive_schedule(events: int, snapshots: int, seed: int) -> list[tuple[int, int]]:
    """`snapshots` pairs (p_at, q_at) of chain events in ``0..events-1`` (`events` >= 3).

    The first two are seed 000's cases: p records just after it sent the token
    and q just before that (the token vanishes), then p while it holds the
    token and q once it received it (it doubles). The others are seeded: each
    snapshot is due at one moment, and each process's clock is off by up to
    `MAX_SKEW` events either way.
    """
    if events < 3:
        raise ValueError(f"the naive schedule needs a run with 3 token events, got {events}")
    pairs = [(1, 0), (0, 2)][:snapshots]
    rnd = random.Random(seed)
    last = events - 1
    for _ in range(snapshots - len(pairs)):
        due = rnd.randint(0, last)
        p_at = min(last, max(0, due + rnd.randint(-MAX_SKEW, MAX_SKEW)))
        q_at = min(last, max(0, due + rnd.randint(-MAX_SKEW, MAX_SKEW)))
        pairs.append((p_at, q_at))
    return pairs


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
