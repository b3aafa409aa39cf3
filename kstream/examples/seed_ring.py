"""Two processes p and q in a ring over Kafka channels: the jobs behind the seeds' demos.

    kstream demo token-ring      (Chandy-Lamport's token example: one token passed around)
    kstream demo bank            (the P1/P2 example: amounts transferred between accounts)

Each demo is one kstream job whose processes are stages joined by real
channels, so its snapshots are the job's own checkpoints::

    p's source ─► p·in (iterate head) ─key_by─► p (keyed) ─key_by─► q (keyed) ─┐
                       ▲                                       q's source ─┘   │
                       └───────────── q→p: the loop channel (feed_back) ◄──────┘

* p is the loop head ``p·in`` (which receives, from p's source and from q)
  followed by the keyed stage ``p`` that holds p's state; the channel between
  them is p's own (a single FIFO input, so a snapshot never records anything
  in it). A loop head holds no keyed state yet, hence the two stages.
* p→q is the channel from ``p`` into ``q``; q→p is the loop channel
  (``kstream.<job>.s1.loop``), which the head logs as channel state.
* Each process has its own source (p's injects the token or p's transfers, q's
  brings q's ticks or transfers), so in unaligned mode a snapshot may reach q
  through q's own source before p's marker: q then records p→q.
* Each process starts snapshots itself, on its own clock: a source record
  ``{"request-snapshot": v}`` is `v`, read after the process's source stage
  asked for a snapshot (`kstream.request_snapshot`). Its source subtask starts
  it at the end of the batch and the coordinator relays it to the other
  source, so a snapshot is started by p or by q, as in seed 000. Which records
  carry the request is the input's choice (`kstream.tools.seeds.demos`), so a
  replay after a restore asks again at the same records.

Every record is keyed by `key`: the token ring has one key, the bank one key
per account. Every parallelism is 1: p and q are one subtask each. p's
stages (its source, ``p·in``, ``p``) are placed on worker `P_WORKER`, q's
(its source, ``q``) on `Q_WORKER`: run with `WORKERS` workers, p and q are
two OS processes.

Token ring: p's source writes ``"token"`` once, then ``"tick"``s; q's source
writes ticks. A process that receives the token (``["token", hop]``) holds it
for a seeded number of its own ticks (1 to `MAX_HOLD`), then passes it on as
hop + 1. Its state is ``[hop, ticks left]`` while it holds the token (s1) and
absent otherwise (s0).

Bank: each process owns three accounts (p: X1, Y1, Z1; q: X2, Y2, Z2), each
starting at `OPENING_BALANCE`. A source record ``["pay", from, to, amount]``
debits the process's account `from` (if it holds enough) and sends
``["credit", to, amount]`` to the other process, which credits `to`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from kstream import Job, KafkaSource, KeyedContext, Stream, request_snapshot

__all__ = [
    "ACCOUNTS",
    "OPENING_BALANCE",
    "P_WORKER",
    "Q_WORKER",
    "REQUEST",
    "TOKEN_KEY",
    "WORKERS",
    "P",
    "Q",
    "bank",
    "hold_ticks",
    "requesting",
    "ring",
    "token_key",
    "token_process",
    "token_ring",
]

#: The processes' operator names (their state is ``s<stage>.<name>`` in a snapshot).
P, Q = "p", "q"
#: The workers running p's stages and q's (`Stream.on_worker`); `WORKERS` in all.
P_WORKER, Q_WORKER = 0, 1
WORKERS = 2
#: Name of the loop (`Stream.iterate`): the head is p's receiving side.
LOOP = "p-in"
#: The token ring's one key.
TOKEN_KEY = "token"
#: A holder passes the token after 1 to MAX_HOLD of its own ticks.
MAX_HOLD = 3
#: Each process's accounts, in the seed's names.
ACCOUNTS = {P: ("X1", "Y1", "Z1"), Q: ("X2", "Y2", "Z2")}
#: What every account holds before its first transfer.
OPENING_BALANCE = 1000
#: A source record ``{REQUEST: v}`` asks for a snapshot started by its process's source.
REQUEST = "request-snapshot"

ProcessFn = Callable[[Any, Any, KeyedContext], Iterator[Any]]


def ring(
    params: dict[str, str],
    key: Callable[[Any], Any],
    p_fn: ProcessFn,
    q_fn: ProcessFn,
    default_name: str,
) -> Job:
    """The ring of the module docstring; `p_fn` and `q_fn` are the processes.

    Parameters: `p-input`, `q-input` (the sources' topics, JSON values) and
    optionally `name`.
    """
    j = Job(params.get("name", default_name), parallelism=1)
    # p's stages on worker 0, q's on worker 1: run with two workers, p and q are
    # two OS processes, and a crash takes down one of them, as in the seeds.
    p_in = j.source(KafkaSource(params["p-input"], value_serde="json")).on_worker(P_WORKER)
    head = p_in.map(requesting, name=f"{P}-clock").iterate(LOOP)
    head.on_worker(P_WORKER)
    p_out = head.key_by(key).process(p_fn, name=P).on_worker(P_WORKER)
    q_in = j.source(KafkaSource(params["q-input"], value_serde="json")).on_worker(Q_WORKER)
    q_in = q_in.map(requesting, name=f"{Q}-clock")
    q_out: Stream = p_out.key_by(key).union(q_in.key_by(key)).process(q_fn, name=Q)
    q_out.on_worker(Q_WORKER)
    head.feed_back(q_out)
    return j


def requesting(value: Any) -> Any:
    """A source record's value; a ``{REQUEST: v}`` one first asks for a snapshot.

    Runs in a source's stage (before the first `key_by`), where
    `request_snapshot` asks that source's subtask to start one.
    """
    if isinstance(value, dict) and REQUEST in value:
        request_snapshot()
        return value[REQUEST]
    return value


# -- the token ring ---------------------------------------------------------------


def hold_ticks(seed: int, hop: int) -> int:
    """How many of its own ticks the receiver of hop `hop` holds the token: seeded,
    and the same on every replay (a restore makes the same decisions again)."""
    return 1 + random.Random(seed * 1_000_003 + hop).randrange(MAX_HOLD)


def token_process(seed: int) -> ProcessFn:
    """The token ring's process (p's and q's alike); `seed` fixes the holding times."""

    def process(_key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        if value == "token":  # injected by p's source: hop 0
            ctx.set([0, hold_ticks(seed, 0)])
        elif isinstance(value, list) and value[:1] == ["token"]:
            hop = int(value[1])
            ctx.set([hop, hold_ticks(seed, hop)])
        else:  # a tick of this process's own clock
            held = ctx.get()
            if held is not None:
                hop, left = held
                if left > 1:
                    ctx.set([hop, left - 1])
                else:
                    ctx.clear()
                    yield ["token", hop + 1]

    return process


def token_key(_value: Any) -> str:
    """The token ring's key: one for everything."""
    return TOKEN_KEY


def token_ring(params: dict[str, str]) -> Job:
    """The token ring; `seed` (default 0) fixes how long each holder keeps the token.

    Seed 000's naive scheme runs the same ring with each process recording
    itself (`kstream.tools.seeds.naive.naive_token_ring`).
    """
    process = token_process(int(params.get("seed", "0")))
    return ring(params, token_key, process, process, "token-ring")


# -- the bank ---------------------------------------------------------------------


def _bank_process(_key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
    balance = int(ctx.get(OPENING_BALANCE))
    if value[0] == "pay":
        _, _, to, amount = value
        if amount <= balance:  # a transfer that would overdraw is refused
            ctx.set(balance - amount)
            yield ["credit", to, amount]
    else:  # ["credit", account, amount] from the other process
        ctx.set(balance + int(value[2]))


def _account(value: Any) -> str:
    """The account a message is about: a payment's debited one, a credit's credited one."""
    return str(value[1])


def bank(params: dict[str, str]) -> Job:
    """The bank: p owns X1, Y1, Z1 and q owns X2, Y2, Z2; payments cross the ring."""
    return ring(params, _account, _bank_process, _bank_process, "bank")
