"""Expected outputs of the event-time examples, computed from their inputs alone.

Each function takes the input as it was written to Kafka: a list of
``(partition, timestamp, key, value)``, the records of one partition in their
offset order (partitions may be interleaved in any way: the result does not
depend on it). No kstream runtime is involved; the rules are those of
:ref:`internals-event-time`, restated here from scratch:

* a partition's watermark before a record is ``max(earlier timestamps of the
  partition) - out_of_orderness`` (none before its first record);
* a record is **too late** iff ``timestamp < that watermark -
  allowed_lateness``: it goes to the late output and into no result.

What a job emits may also hold intermediate results (a window fired, then an
allowed-late record updated it; sessions emitted, then merged): the reference
gives the FINAL result per window, which is the last emission for it, and the
exact set of too-late records. A window is certain to have fired once every
partition's watermark passed its end (`Windowed.certainly_fired`); later ones
fire only if the job's watermark got there (idleness, or more input).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kstream import Session, Sliding, TimeWindow, Tumbling

__all__ = [
    "Enriched",
    "Joined",
    "Record",
    "Windowed",
    "enrichment",
    "final_results",
    "interval_join",
    "sessions",
    "split_late",
    "too_late",
    "windowed_counts",
]

#: One input record: (partition, timestamp ms, key, value).
Record = tuple[int, int, str, str | None]


def too_late(records: list[Record], out_of_orderness: int, allowed_lateness: int) -> list[bool]:
    """For each record (in list order), whether it is too late at its partition."""
    top: dict[int, int] = {}
    verdicts = []
    for partition, ts, _, _ in records:
        mark = top.get(partition)
        verdicts.append(mark is not None and ts < mark - out_of_orderness - allowed_lateness)
        top[partition] = ts if mark is None else max(ts, mark)
    return verdicts


def split_late(
    records: Iterable[Record], out_of_orderness: int, allowed_lateness: int
) -> tuple[list[Record], list[Record], int | None]:
    """(admissible records, too-late records, min over partitions of their final watermark).

    The last value is None when no partition has a record.
    """
    records = list(records)
    verdicts = too_late(records, out_of_orderness, allowed_lateness)
    top: dict[int, int] = {}
    for partition, ts, _, _ in records:
        top[partition] = max(ts, top.get(partition, ts))
    final = min((t - out_of_orderness for t in top.values()), default=None)
    kept = [r for r, late in zip(records, verdicts, strict=True) if not late]
    late = [r for r, late in zip(records, verdicts, strict=True) if late]
    return kept, late, final


@dataclass(frozen=True, slots=True)
class Windowed:
    """Final per-(key, window) results, the too-late records, and what must have fired."""

    results: dict[tuple[str, TimeWindow], object]
    late: list[Record]
    #: Every partition's final watermark is at least this: windows ending at or
    #: before it fired whatever the interleaving.
    watermark: int | None

    def certainly_fired(self) -> dict[tuple[str, TimeWindow], object]:
        w = self.watermark
        return {kw: r for kw, r in self.results.items() if w is not None and kw[1].end <= w}


def windowed_counts(
    records: Iterable[Record],
    assigner: Tumbling | Sliding,
    out_of_orderness: int,
    allowed_lateness: int = 0,
) -> Windowed:
    """Windowed counts per key: the number of admissible records of the key in each window."""
    kept, late, watermark = split_late(records, out_of_orderness, allowed_lateness)
    counts: dict[tuple[str, TimeWindow], int] = defaultdict(int)
    for _, ts, key, _ in kept:
        for window in assigner.assign(ts):
            counts[key, window] += 1
    return Windowed(dict(counts), late, watermark)


def sessions(
    records: Iterable[Record], gap: int, out_of_orderness: int, allowed_lateness: int = 0
) -> Windowed:
    """User sessions: per key, records less than `gap` apart, as (clicks, sorted values).

    A session is ``[first timestamp, last timestamp + gap)``; its result is its
    record count and its values sorted (arrival order is not deterministic).
    """
    kept, late, watermark = split_late(records, out_of_orderness, allowed_lateness)
    by_key: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
    for _, ts, key, value in kept:
        by_key[key].append((ts, value))
    results: dict[tuple[str, TimeWindow], object] = {}
    Session(gap)  # validates gap
    for key, items in by_key.items():
        items.sort(key=lambda tv: (tv[0], tv[1] or ""))
        group: list[tuple[int, str | None]] = []
        for item in [*items, None]:
            if group and (item is None or item[0] - group[-1][0] >= gap):
                window = TimeWindow(group[0][0], group[-1][0] + gap)
                results[key, window] = (len(group), tuple(sorted(v or "" for _, v in group)))
                group = []
            if item is not None:
                group.append(item)
    return Windowed(results, late, watermark)


@dataclass(frozen=True, slots=True)
class Joined:
    """The interval join's output as a set, and each side's too-late records."""

    pairs: frozenset[tuple[str, str | None, str | None, int]]
    late_left: list[Record]
    late_right: list[Record]


def interval_join(
    left: Iterable[Record],
    right: Iterable[Record],
    lower: int,
    upper: int,
    out_of_orderness: int,
) -> Joined:
    """Orders joined with payments: same key and ``l.ts - lower <= r.ts <= l.ts + upper``.

    Each pair is ``(key, left value, right value, max(l.ts, r.ts))``. No
    allowed lateness: a record behind its partition's watermark is too late,
    which is what lets the join drop a buffered record for good once the
    watermark passes its bound. The emission order is not deterministic.
    """
    kept_l, late_l, _ = split_late(left, out_of_orderness, 0)
    kept_r, late_r, _ = split_late(right, out_of_orderness, 0)
    rights: dict[str, list[tuple[int, str | None]]] = defaultdict(list)
    for _, ts, key, value in kept_r:
        rights[key].append((ts, value))
    pairs = frozenset(
        (key, lv, rv, max(lt, rt))
        for _, lt, key, lv in kept_l
        for rt, rv in rights.get(key, ())
        if lt - lower <= rt <= lt + upper
    )
    return Joined(pairs, late_l, late_r)


@dataclass(frozen=True, slots=True)
class Enriched:
    """The enrichment's output as a set, and each side's too-late records."""

    rows: frozenset[tuple[str, str | None, str | None, int]]
    late_stream: list[Record]
    late_table: list[Record]


def enrichment(
    stream: Iterable[Record], table: Iterable[Record], out_of_orderness: int
) -> Enriched:
    """Each stream record with its key's table value as of its timestamp.

    "As of" is event time: the table version of the key with the greatest
    ``(timestamp, partition, offset)`` among those with ``timestamp <= the
    stream record's``; its value, or None if there is none or it is a
    tombstone (value None). Rows are ``(key, stream value, table value,
    stream timestamp)``. A too-late table record would rewrite what was
    already joined, so it goes to the late output like a too-late stream record.
    """
    kept_s, late_s, _ = split_late(stream, out_of_orderness, 0)
    table = list(table)
    verdicts = too_late(table, out_of_orderness, 0)
    offsets: dict[int, int] = defaultdict(int)
    versions: dict[str, list[tuple[tuple[int, int, int], str | None]]] = defaultdict(list)
    for (partition, ts, key, value), late in zip(table, verdicts, strict=True):
        offset = offsets[partition]
        offsets[partition] += 1
        if not late:
            versions[key].append(((ts, partition, offset), value))
    rows = set()
    for _, ts, key, value in kept_s:
        valid = [v for v in versions.get(key, ()) if v[0][0] <= ts]
        rows.add((key, value, max(valid)[1] if valid else None, ts))
    late_t = [r for r, late in zip(table, verdicts, strict=True) if late]
    return Enriched(frozenset(rows), late_s, late_t)


def final_results(
    emissions: Iterable[dict[str, object]], merging: bool = False
) -> dict[tuple[object, TimeWindow], object]:
    """A window operator's output reduced to what `Windowed.results` compares with.

    `emissions` are the operator's result dicts (``key``, ``start``, ``end``,
    ``value``, ``update``) in their output order: the last one per (key,
    window) is its final result. With `merging` (session windows), a session
    emitted and later merged into a wider one is superseded by it: an emission
    drops the key's earlier windows it overlaps.
    """
    final: dict[tuple[object, TimeWindow], object] = {}
    for out in emissions:
        key, start, end = out["key"], out["start"], out["end"]
        assert isinstance(start, int), out
        assert isinstance(end, int), out
        window = TimeWindow(start, end)
        if merging:
            for k, w in [kw for kw in final if kw[0] == key and kw[1].overlaps(window)]:
                del final[k, w]
        final[key, window] = out["value"]
    return final
