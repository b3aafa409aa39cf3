"""What a campaign runs: a job, its generated input, and its judge.

A `Workload` names the job (`spec`, its parameters for an input and an output
topic), generates input lines from a seed, and judges the output read back
against the input read back (the input topic as it is, not as it was meant to
be written). `final_values` is what the output's last value per key must be,
which tells the campaign the job has caught up with all input.

Workloads: ``wordcount`` (the running word count) and ``windowed``
(`kstream.examples.windowed_counts`: event-time tumbling windows, counted per
key, final results only), and the sink workloads ``postgres``, ``delta`` and
``iceberg``: the word count writing every update as a row into a table of that
sink (`sink_jobs`), judged from the table read back (`tables`) exactly as the
word count's topic is. The windowed input is made so that its exact output
does not depend on when anything ran: every event is later than the one before
(so, value i going to partition i % P, every partition's events are in order and
none is ever late), every partition gets events all along (the idle timeout is
an hour: a partition is never judged idle), and `CLOSERS` events far ahead of the
last, at least one per partition, carry the watermark past every real window at
the end. They share one time, so their own window never closes and has no result.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kstream.errors import ConfigurationError
from kstream.tools.chaos.verdict import (
    Output,
    Verdict,
    expected_counts,
    expected_windows,
    judge_running_count,
    judge_windowed_count,
)

__all__ = ["WORKLOADS", "Workload", "workload"]


def _same(value: bytes | None) -> bytes | None:
    return value


@dataclass(frozen=True, slots=True)
class Workload:
    """A job under test; `judge(lines, outputs, fault_starts)` gives the verdict.

    `final_values(lines)` maps each output key to its last value, in the form
    `canonical` gives an output value (the output as written, by default).
    """

    name: str
    spec: str
    generate: Callable[[int, int], list[bytes]]
    judge: Callable[[Sequence[bytes], Sequence[Output], Sequence[float]], Verdict]
    final_values: Callable[[Sequence[bytes]], dict[bytes, bytes]]
    canonical: Callable[[bytes | None], bytes | None] = _same
    #: The key an output belongs to, from its Kafka key and value (the Kafka key by default).
    output_key: Callable[[bytes | None, bytes | None], bytes | None] = lambda key, _value: key
    #: Job parameters besides its input and output topics.
    extra_params: Mapping[str, str] = field(default_factory=dict)
    #: Parameters naming topics the job writes besides its output (created with it).
    topic_params: tuple[str, ...] = ()
    #: The sink the job writes into instead of the output topic (`tables.SINKS`), or "".
    sink: str = ""
    #: Fault kinds besides `schedule.KINDS` that hit what this workload writes into.
    fault_kinds: tuple[str, ...] = ()

    def params(self, input_topic: str, output_topic: str) -> dict[str, str]:
        params = {"input": input_topic, "output": output_topic, **self.extra_params}
        for name in self.topic_params:
            params[name] = f"{output_topic}-{name}"
        return params

    def topics(self, input_topic: str, output_topic: str) -> list[str]:
        """Every topic the campaign creates for the job."""
        params = self.params(input_topic, output_topic)
        return [input_topic, output_topic, *(params[n] for n in self.topic_params)]

    def behind(
        self, finals: Mapping[bytes, bytes], latest: Mapping[bytes | None, bytes | None]
    ) -> int:
        """How many keys' latest output (`latest`, as read) is not their final value yet."""
        return sum(1 for k, v in finals.items() if self.canonical(latest.get(k)) != v)


#: Distinct words of the generated text: few enough that counts grow high, many
#: enough that every output partition gets keys.
VOCABULARY = 800
#: Words per generated line, at most.
MAX_WORDS = 6


def word_lines(seed: int, n: int) -> list[bytes]:
    """`n` lines of 1..`MAX_WORDS` words drawn from ``w0``..``w{VOCABULARY-1}``, from `seed`."""
    rnd = random.Random(seed)
    return [
        " ".join(f"w{rnd.randrange(VOCABULARY)}" for _ in range(rnd.randint(1, MAX_WORDS))).encode()
        for _ in range(n)
    ]


def word_finals(lines: Sequence[bytes]) -> dict[bytes, bytes]:
    return {w.encode(): str(n).encode() for w, n in expected_counts(lines).items()}


#: The windowed workload's window size, and its events' keys.
WINDOW_MS = 1_000
EVENT_KEYS = 40
#: Event time between one event and the next, at most (at least 1 ms).
EVENT_STEP_MS = 20
#: Events at the end, far ahead of the others, spread over every input partition.
CLOSERS = 16
CLOSER_KEY = "~close"
#: Event time of the first event: a fixed day, so a seed always gives the same input.
#: (The campaign's topics keep records forever: results carry event time.)
EVENTS_START_MS = 1_700_000_000_000


def event_lines(seed: int, n: int) -> list[bytes]:
    """`n` JSON events ``{"key", "ts", "value"}``, each later than the last, then `CLOSERS`
    events at one time far ahead."""
    rnd = random.Random(seed)
    ts, lines = EVENTS_START_MS, []
    for i in range(n):
        ts += rnd.randint(1, EVENT_STEP_MS)
        key = f"k{rnd.randrange(EVENT_KEYS)}"
        lines.append(json.dumps({"key": key, "ts": ts, "value": f"e{i}"}).encode())
    # One time for every closer: their own window never closes, so never has a result.
    close = ts - ts % WINDOW_MS + 100 * WINDOW_MS + WINDOW_MS // 2
    for i in range(CLOSERS):
        lines.append(json.dumps({"key": CLOSER_KEY, "ts": close, "value": f"c{i}"}).encode())
    return lines


def _windows(lines: Sequence[bytes]) -> dict[tuple[str, int], int]:
    return {kw: n for kw, n in expected_windows(lines, WINDOW_MS).items() if kw[0] != CLOSER_KEY}


def judge_windows(
    lines: Sequence[bytes], outputs: Sequence[Output], starts: Sequence[float]
) -> Verdict:
    return judge_windowed_count(_windows(lines), WINDOW_MS, len(lines), outputs, starts)


def _canonical_window(value: bytes | None) -> bytes | None:
    """A window result as (start, count) text: how `window_finals` states it."""
    try:
        d = json.loads(value or b"")
        return f"{d['start']}:{d['value']}".encode()
    except (ValueError, TypeError, KeyError):
        return value


def _window_key(_key: bytes | None, value: bytes | None) -> bytes | None:
    """A window result's key and window, from its JSON: ``key@start``.

    The campaign follows each key's windows one by one (a window's last result is
    its count), not the key's latest result: it judges by what each window holds,
    whichever partition its results were written to.
    """
    try:
        d = json.loads(value or b"")
        key, start = d["key"], d["start"]
    except (ValueError, TypeError, KeyError):
        return None
    return f"{key}@{start}".encode() if isinstance(key, str) else None


def window_finals(lines: Sequence[bytes]) -> dict[bytes, bytes]:
    """Per key, its last window (``key@start``) and that window's count."""
    last: dict[str, tuple[int, int]] = {}
    for (key, start), n in _windows(lines).items():
        if start >= last.get(key, (start, 0))[0]:
            last[key] = (start, n)
    return {f"{k}@{s}".encode(): f"{s}:{n}".encode() for k, (s, n) in last.items()}


WORKLOADS = {
    "wordcount": Workload(
        "wordcount",
        "kstream.examples.wordcount:job",
        word_lines,
        judge_running_count,
        word_finals,
    ),
    "windowed": Workload(
        "windowed",
        "kstream.examples.windowed_counts:job",
        event_lines,
        judge_windows,
        window_finals,
        canonical=_canonical_window,
        output_key=_window_key,
        extra_params={"window": "tumbling", "size": str(WINDOW_MS), "ooo": "0", "idle": "3600000"},
        topic_params=("late",),
    ),
    **{
        sink: Workload(
            sink,
            "kstream.tools.chaos.sink_jobs:job",
            word_lines,
            judge_running_count,
            word_finals,
            sink=sink,
            fault_kinds=("postgres-restart",) if sink == "postgres" else (),
        )
        for sink in ("postgres", "delta", "iceberg")
    },
}


def workload(name: str) -> Workload:
    """The workload called `name`; raises `ConfigurationError` for an unknown one."""
    if name not in WORKLOADS:
        raise ConfigurationError(
            f"--workload must be one of {', '.join(sorted(WORKLOADS))}; got {name!r}"
        )
    return WORKLOADS[name]
