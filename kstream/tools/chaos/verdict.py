"""What correct output is, and how far the output read is from it (pure).

The checker's own definition for a running count (the word count): words are
``line.split()`` of each input value (UTF-8); with N_w the number of times word
w occurs in the whole input, the output must hold, for every w, each of the
values 1..N_w exactly once as decimal text, keyed by w, each partition's
outputs for w increasing. Taking the outputs in (partition, offset) order,
every output is exactly one of

* *wrong*: its key is no input word, or its value is not the canonical
  decimal text of some 1 ≤ v ≤ N_w;
* *duplicate*: (w, v) was output before;
* *out of order*: not a duplicate, but an earlier output for w in the same
  partition had a higher value;
* correct;

and *lost* counts the (w, v), 1 ≤ v ≤ N_w, that no output holds. A word whose
highest output is not N_w is *unfinished*: the job has not (yet) caught up.

Per fault window (`schedule.window_of` of the time the checker first saw the
record): every output-side violation falls in the window it was seen in; a
lost (w, v) falls in the window of the first output of w with a higher value
(where the gap showed), or the last window when none came.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kstream.tools.chaos.schedule import window_of

__all__ = [
    "Output",
    "Verdict",
    "WindowCounts",
    "expected_counts",
    "expected_windows",
    "judge_running_count",
    "judge_windowed_count",
]


@dataclass(frozen=True, slots=True)
class Output:
    """One output record as the checker read it; `seen_at`: seconds after the campaign start."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    seen_at: float


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """The figures of one fault window (index -1: before the first fault)."""

    window: int
    outputs: int = 0
    duplicates: int = 0
    lost: int = 0
    out_of_order: int = 0
    wrong: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The output judged against the input; `clean` when nothing is wrong or missing."""

    inputs: int
    expected: int
    outputs: int
    duplicates: int
    lost: int
    out_of_order: int
    wrong: int
    unfinished: int
    windows: tuple[WindowCounts, ...] = field(default=())
    examples: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return not (self.duplicates or self.lost or self.out_of_order or self.wrong)


def expected_counts(lines: Iterable[bytes]) -> Counter[str]:
    """N_w for every word w of the input lines."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.decode("utf-8", errors="replace").split())
    return counts


def _value(raw: bytes | None) -> int | None:
    """The count `raw` holds, if it is canonical decimal text (no sign, no leading zero)."""
    if raw is None or not raw.isdigit() or raw.startswith(b"0"):
        return None
    return int(raw)


class _Tally:
    """Violations counted in total and per fault window, with the first few as examples."""

    def __init__(self, starts: Sequence[float]) -> None:
        self.starts = starts
        self.per_window: dict[int, Counter[str]] = {}
        self.totals: Counter[str] = Counter()
        self.examples: list[str] = []

    def output(self, o: Output) -> int:
        """Count output `o` in its window; return that window."""
        window = window_of(self.starts, o.seen_at)
        self.per_window.setdefault(window, Counter())["outputs"] += 1
        return window

    def violation(self, window: int, kind: str, example: str) -> None:
        self.totals[kind] += 1
        self.per_window.setdefault(window, Counter())[kind] += 1
        if len(self.examples) < 20:
            self.examples.append(f"{kind}: {example}")

    def bad_output(self, window: int, kind: str, o: Output) -> None:
        self.violation(
            window,
            kind,
            f"[{o.partition}]@{o.offset} key={o.key!r} value={o.value!r} at {o.seen_at:.1f}s",
        )

    @property
    def last_window(self) -> int:
        return max([-1, *self.per_window, len(self.starts) - 1])

    def verdict(self, inputs: int, expected: int, outputs: int, unfinished: int) -> Verdict:
        for w in range(-1, len(self.starts)):
            self.per_window.setdefault(w, Counter())  # windows without outputs are listed too
        return Verdict(
            inputs=inputs,
            expected=expected,
            outputs=outputs,
            duplicates=self.totals["duplicates"],
            lost=self.totals["lost"],
            out_of_order=self.totals["out_of_order"],
            wrong=self.totals["wrong"],
            unfinished=unfinished,
            windows=tuple(
                WindowCounts(
                    w,
                    outputs=c["outputs"],
                    duplicates=c["duplicates"],
                    lost=c["lost"],
                    out_of_order=c["out_of_order"],
                    wrong=c["wrong"],
                )
                for w, c in sorted(self.per_window.items())
            ),
            examples=tuple(self.examples),
        )


def judge_running_count(
    lines: Sequence[bytes], outputs: Sequence[Output], starts: Sequence[float]
) -> Verdict:
    """Judge `outputs` (in any order) against `lines`; `starts` are the fault times."""
    counts = expected_counts(lines)
    tally = _Tally(starts)
    seen: dict[str, list[tuple[int, int]]] = {}  # word -> (value, window) of correct outputs
    values: dict[str, set[int]] = {}
    highest: dict[tuple[int, str], int] = {}
    for o in sorted(outputs, key=lambda o: (o.partition, o.offset)):
        window = tally.output(o)
        word = o.key.decode("utf-8", errors="replace") if o.key is not None else None
        v = _value(o.value)
        if word is None or word not in counts or v is None or not 1 <= v <= counts[word]:
            tally.bad_output(window, "wrong", o)
            continue
        have = values.setdefault(word, set())
        if v in have:
            tally.bad_output(window, "duplicates", o)
            continue
        if highest.get((o.partition, word), 0) > v:
            tally.bad_output(window, "out_of_order", o)
        have.add(v)
        seen.setdefault(word, []).append((v, window))
        highest[(o.partition, word)] = max(highest.get((o.partition, word), 0), v)
    last_window = tally.last_window
    unfinished = 0
    for word, n in counts.items():
        got = sorted(seen.get(word, []))
        have_values = [v for v, _ in got]
        if not got or got[-1][0] != n:
            unfinished += 1
        if n == len(have_values):
            continue
        present = set(have_values)
        for v in range(1, n + 1):
            if v in present:
                continue
            after = bisect.bisect_right(have_values, v)
            where = got[after][1] if after < len(got) else last_window
            tally.violation(where, "lost", f"key={word!r} value {v} of {n}")
    return tally.verdict(len(lines), sum(counts.values()), len(outputs), unfinished)


def expected_windows(lines: Iterable[bytes], size_ms: int) -> dict[tuple[str, int], int]:
    """Events per (key, window start) of tumbling windows of `size_ms`, from JSON event lines
    ``{"key", "ts", ...}``; lines that are not such events count nowhere (the job
    dead-letters them)."""
    counts: dict[tuple[str, int], int] = Counter()
    for line in lines:
        event = _json(line)
        if event is None or not isinstance(event.get("key"), str):
            continue
        ts = event.get("ts")
        if isinstance(ts, int) and not isinstance(ts, bool):
            counts[event["key"], ts - ts % size_ms] += 1
    return dict(counts)


def _json(raw: bytes | None) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or b"")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def judge_windowed_count(
    expected: dict[tuple[str, int], int],
    size_ms: int,
    inputs: int,
    outputs: Sequence[Output],
    starts: Sequence[float],
) -> Verdict:
    """Judge windowed counts against `expected` (`expected_windows`), final results only.

    Every expected (key, window) must be output exactly once as ``{"key", "start",
    "end": start + size_ms, "value": count, "update": false}`` (with its key as
    Kafka key, or none);
    per partition, a key's windows come in increasing start order. Anything
    else is *wrong*; a second output of a (key, window) is a *duplicate*.
    """
    tally = _Tally(starts)
    seen: dict[str, list[tuple[int, int]]] = {}  # key -> (start, window) of correct outputs
    done: set[tuple[str, int]] = set()
    latest: dict[tuple[int, str], int] = {}
    for o in sorted(outputs, key=lambda o: (o.partition, o.offset)):
        window = tally.output(o)
        d = _json(o.value)
        if d is None:
            tally.bad_output(window, "wrong", o)
            continue
        key, start = d.get("key"), d.get("start")
        if (
            not isinstance(key, str)
            or not isinstance(start, int)
            or expected.get((key, start)) != d.get("value")
            or d.get("end") != start + size_ms
            or d.get("update") is not False
            or o.key not in (None, key.encode())
        ):
            tally.bad_output(window, "wrong", o)
            continue
        if (key, start) in done:
            tally.bad_output(window, "duplicates", o)
            continue
        if latest.get((o.partition, key), start) > start:
            tally.bad_output(window, "out_of_order", o)
        done.add((key, start))
        seen.setdefault(key, []).append((start, window))
        latest[o.partition, key] = max(latest.get((o.partition, key), start), start)
    last_window = tally.last_window
    last_start: dict[str, int] = {}
    for key, start in expected:
        last_start[key] = max(last_start.get(key, start), start)
    unfinished = sum(1 for key, start in last_start.items() if (key, start) not in done)
    for key, start in sorted(expected):
        if (key, start) in done:
            continue
        got = sorted(seen.get(key, []))
        after = bisect.bisect_right([s for s, _ in got], start)
        where = got[after][1] if after < len(got) else last_window
        tally.violation(where, "lost", f"key={key!r} window [{start}, {start + size_ms})")
    return tally.verdict(inputs, len(expected), len(outputs), unfinished)
