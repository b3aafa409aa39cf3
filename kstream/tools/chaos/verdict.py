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
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kstream.tools.chaos.schedule import window_of

__all__ = ["Output", "Verdict", "WindowCounts", "expected_counts", "judge_running_count"]


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


def judge_running_count(
    lines: Sequence[bytes], outputs: Sequence[Output], starts: Sequence[float]
) -> Verdict:
    """Judge `outputs` (in any order) against `lines`; `starts` are the fault times."""
    counts = expected_counts(lines)
    per_window: dict[int, Counter[str]] = {}

    def note(window: int, what: str) -> None:
        per_window.setdefault(window, Counter())[what] += 1

    seen: dict[str, list[tuple[int, int]]] = {}  # word -> (value, window) of correct outputs
    values: dict[str, set[int]] = {}
    highest: dict[tuple[int, str], int] = {}
    examples: list[str] = []
    totals: Counter[str] = Counter()
    for o in sorted(outputs, key=lambda o: (o.partition, o.offset)):
        window = window_of(starts, o.seen_at)
        note(window, "outputs")
        word = o.key.decode("utf-8", errors="replace") if o.key is not None else None
        v = _value(o.value)
        kind = "correct"
        if word is None or word not in counts or v is None or not 1 <= v <= counts[word]:
            kind = "wrong"
        else:
            have = values.setdefault(word, set())
            if v in have:
                kind = "duplicates"
            else:
                if highest.get((o.partition, word), 0) > v:
                    kind = "out_of_order"
                have.add(v)
                seen.setdefault(word, []).append((v, window))
                highest[(o.partition, word)] = max(highest.get((o.partition, word), 0), v)
        if kind != "correct":
            totals[kind] += 1
            note(window, kind)
            if len(examples) < 20:
                examples.append(
                    f"{kind}: [{o.partition}]@{o.offset} key={o.key!r} value={o.value!r} "
                    f"at {o.seen_at:.1f}s"
                )
    last_window = max([-1, *per_window, len(starts) - 1])
    for w in range(-1, len(starts)):
        per_window.setdefault(w, Counter())  # windows without outputs are listed too
    unfinished = 0
    for word, n in counts.items():
        got = sorted(seen.get(word, []))
        have_values = [v for v, _ in got]
        if not got or got[-1][0] != n:
            unfinished += 1
        missing = n - len(have_values)
        if not missing:
            continue
        totals["lost"] += missing
        present = set(have_values)
        for v in range(1, n + 1):
            if v in present:
                continue
            after = bisect.bisect_right(have_values, v)
            note(got[after][1] if after < len(got) else last_window, "lost")
            if len(examples) < 20:
                examples.append(f"lost: key={word!r} value {v} of {n}")
    return Verdict(
        inputs=len(lines),
        expected=sum(counts.values()),
        outputs=len(outputs),
        duplicates=totals["duplicates"],
        lost=totals["lost"],
        out_of_order=totals["out_of_order"],
        wrong=totals["wrong"],
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
            for w, c in sorted(per_window.items())
        ),
        examples=tuple(examples),
    )
