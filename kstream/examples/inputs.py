"""Deterministic inputs for the event-time examples (a fixed seed gives the same list).

Every generator returns records ``(partition, timestamp, key, value)`` in a
write order: each partition's records in their offset order, partitions
interleaved by time. Within a partition the timestamps are out of order by at
most `out_of_orderness` (each record is at least its partition's maximum so
far minus the bound: never late), except the `late` records added on purpose:
each is more than `out_of_orderness + allowed_lateness` behind its partition's
maximum at its position, so it is too late whatever the interleaving
(`references.too_late` says True for exactly those). One partition
(`IDLE_PARTITION`) has no records for a stretch of event time, so it holds the
watermark back and, paced by a test, can go idle.
"""

from __future__ import annotations

import random
from collections import defaultdict

from kstream.examples.references import Record

__all__ = [
    "IDLE_PARTITION",
    "arrange",
    "clicks",
    "keyed_events",
    "orders_and_payments",
    "profiles_and_visits",
]

#: The partition with a stretch of nothing.
IDLE_PARTITION = 1
#: Event time starts here (2023-11-14), far from 0 so no timestamp is negative.
START_MS = 1_700_000_000_000


def arrange(
    items: list[Record],
    rng: random.Random,
    out_of_orderness: int,
    late: int = 0,
    allowed_lateness: int = 0,
    idle: tuple[int, int] | None = None,
) -> list[Record]:
    """Order `items` per partition with bounded disorder, add `late` too-late records.

    A record is written when its timestamp plus a jitter in ``[0,
    out_of_orderness]`` comes up, so any earlier record of its partition is at
    most `out_of_orderness` ahead of it. `idle` = ``(from, to)`` drops
    `IDLE_PARTITION`'s records with timestamps in ``[from, to)``.
    """
    by_partition: dict[int, list[tuple[int, Record]]] = defaultdict(list)
    for item in items:
        if idle is not None and item[0] == IDLE_PARTITION and idle[0] <= item[1] < idle[1]:
            continue
        by_partition[item[0]].append((item[1] + rng.randint(0, out_of_orderness), item))
    for queue in by_partition.values():
        queue.sort(key=lambda jr: (jr[0], jr[1][1]))
    candidates = [(p, i) for p, q in by_partition.items() for i in range(2, len(q))]
    for n, (p, i) in enumerate(sorted(rng.sample(candidates, min(late, len(candidates))))):
        queue = by_partition[p]
        top = max(r[1] for _, r in queue[:i])
        ts = top - out_of_orderness - allowed_lateness - 1 - rng.randint(0, 2 * out_of_orderness)
        key = queue[i - 1][1][2]
        # Written where the record before it was: same write slot, one offset later.
        queue.insert(i, (queue[i - 1][0], (p, ts, key, f"late-{n}")))
    merged = [(slot, p, k, r) for p, q in by_partition.items() for k, (slot, r) in enumerate(q)]
    merged.sort(key=lambda x: (x[0], x[1], x[2]))
    return [r for _, _, _, r in merged]


def keyed_events(
    seed: int,
    *,
    partitions: int = 3,
    keys: int = 5,
    count: int = 300,
    step_ms: int = 200,
    out_of_orderness: int = 1_000,
    late: int = 4,
    allowed_lateness: int = 0,
) -> list[Record]:
    """Events of a few keys spread over every partition, for windowed counts."""
    rng = random.Random(seed)
    clock, items = START_MS, list[Record]()
    for n in range(count):
        clock += rng.randint(0, step_ms)
        key = f"k{rng.randrange(keys)}"
        items.append((rng.randrange(partitions), clock, key, f"e{n}"))
    span = clock - START_MS
    idle = (START_MS + span // 3, START_MS + span // 2)
    return arrange(items, rng, out_of_orderness, late, allowed_lateness, idle)


def clicks(
    seed: int,
    *,
    partitions: int = 3,
    users: int = 6,
    gap_ms: int = 30_000,
    sessions_per_user: int = 4,
    out_of_orderness: int = 5_000,
    late: int = 3,
    allowed_lateness: int = 0,
) -> list[Record]:
    """A click stream partitioned by user: bursts of clicks closer than `gap_ms`, far apart."""
    rng = random.Random(seed)
    items: list[Record] = []
    for u in range(users):
        clock = START_MS + rng.randint(0, gap_ms)
        for _ in range(sessions_per_user):
            for _ in range(rng.randint(1, 6)):
                items.append((u % partitions, clock, f"user{u}", f"/page{rng.randrange(9)}"))
                clock += rng.randint(0, gap_ms - 1)
            clock += gap_ms + rng.randint(0, 4 * gap_ms)
    span = max(ts for _, ts, _, _ in items) - START_MS
    idle = (START_MS + span // 3, START_MS + span // 2)
    return arrange(items, rng, out_of_orderness, late, allowed_lateness, idle)


def orders_and_payments(
    seed: int,
    *,
    partitions: int = 3,
    orders: int = 60,
    lower_ms: int = 0,
    upper_ms: int = 60_000,
    out_of_orderness: int = 5_000,
    late: int = 2,
) -> tuple[list[Record], list[Record]]:
    """Orders and their payments (none, one or two; some outside the bound), keyed by order."""
    rng = random.Random(seed)
    order_items: list[Record] = []
    payment_items: list[Record] = []
    clock = START_MS
    for n in range(orders):
        clock += rng.randint(0, 3_000)
        key = f"order{n}"
        order_items.append((n % partitions, clock, key, f"amount={rng.randint(1, 500)}"))
        for m in range(rng.choice((0, 1, 1, 1, 2))):
            ts = clock + rng.randint(-lower_ms - 5_000, upper_ms + 5_000)
            payment_items.append((n % partitions, ts, key, f"payment{n}.{m}"))
    return (
        arrange(
            order_items, rng, out_of_orderness, late, idle=(START_MS + 30_000, START_MS + 60_000)
        ),
        arrange(payment_items, rng, out_of_orderness, late),
    )


def profiles_and_visits(
    seed: int,
    *,
    partitions: int = 3,
    users: int = 8,
    updates: int = 30,
    visits: int = 200,
    out_of_orderness: int = 2_000,
    late: int = 2,
) -> tuple[list[Record], list[Record]]:
    """A table of user profiles (updates and tombstones, keyed) and a stream of visits."""
    rng = random.Random(seed)
    span = visits * 500
    table: list[Record] = []
    for n in range(updates):
        u = rng.randrange(users)
        value = None if rng.random() < 0.15 else f"tier{rng.randrange(3)}#{n}"
        table.append((u % partitions, START_MS + rng.randrange(span), f"user{u}", value))
    stream: list[Record] = []
    for n in range(visits):
        u = rng.randrange(users)
        ts = START_MS + n * 500 + rng.randrange(500)
        stream.append((rng.randrange(partitions), ts, f"user{u}", f"visit{n}"))
    return (
        arrange(table, rng, out_of_orderness, late),
        arrange(
            stream, rng, out_of_orderness, late, idle=(START_MS + span // 3, START_MS + span // 2)
        ),
    )
