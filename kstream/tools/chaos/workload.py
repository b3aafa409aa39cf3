"""What a campaign runs: a job, its generated input, and its judge.

A `Workload` names the job (`spec`, its parameters for an input and an output
topic), generates input lines from a seed, and judges the output read back
against the input read back (the input topic as it is, not as it was meant to
be written). `final_values` is what the output's last value per key must be,
which tells the campaign the job has caught up with all input.

Only the running word count exists so far; a windowed job plugs in beside it
with its own generator and judge.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kstream.errors import ConfigurationError
from kstream.tools.chaos.verdict import Output, Verdict, expected_counts, judge_running_count

__all__ = ["WORKLOADS", "Workload", "workload"]


@dataclass(frozen=True, slots=True)
class Workload:
    """A job under test; `judge(lines, outputs, fault_starts)` gives the verdict."""

    name: str
    spec: str
    generate: Callable[[int, int], list[bytes]]
    judge: Callable[[Sequence[bytes], Sequence[Output], Sequence[float]], Verdict]
    final_values: Callable[[Sequence[bytes]], dict[bytes, bytes]]

    def params(self, input_topic: str, output_topic: str) -> dict[str, str]:
        return {"input": input_topic, "output": output_topic}


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


WORKLOADS = {
    "wordcount": Workload(
        "wordcount",
        "kstream.examples.wordcount:job",
        word_lines,
        judge_running_count,
        word_finals,
    ),
}


def workload(name: str) -> Workload:
    """The workload called `name`; raises `ConfigurationError` for an unknown one."""
    if name not in WORKLOADS:
        raise ConfigurationError(
            f"--workload must be one of {', '.join(sorted(WORKLOADS))}; got {name!r}"
        )
    return WORKLOADS[name]
