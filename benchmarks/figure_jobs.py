"""The jobs behind the latency and state-size figures (loaded by path by the workers).

- ``timed_wordcount``: the word count of `kstream.examples.wordcount` with the
  input's Kafka timestamps as event time, so every output carries its input
  record's append time (CreateTime) as its own timestamp: the latency figure
  reads it back from the output.
- ``state_filler``: keyed state of a chosen size. An input ``fill <first> <n>
  <bytes>`` puts keys ``k<first>`` .. ``k<first+n-1>`` into state, each with a
  random (incompressible) value of `bytes` bytes, and emits nothing; an input ``probe <seq>`` emits
  (``probe``, ``<seq>``) after one state update, so the output shows when the
  job processes input again (recovery time).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from kstream import Job, KafkaSink, KafkaSource, ValueState
from kstream.examples.wordcount import count


def timed_wordcount(params: dict[str, str]) -> Job:
    """The running word count, event time from the input's Kafka timestamps."""
    j = Job(params["name"])
    (
        j.source(KafkaSource(params["input"], timestamps="kafka"))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(KafkaSink(params["output"]))
    )
    return j


def expand(line: str) -> Iterator[tuple[str, str]]:
    """``fill first n size`` -> (``k<i>``, size) for n keys; ``probe seq`` -> (probe, seq)."""
    kind, *args = line.split()
    if kind == "fill":
        first, n, size = args
        for i in range(int(first), int(first) + int(n)):
            yield f"k{i}", size
    else:
        yield "probe", args[0]


def keep(key: str, value: str, state: ValueState) -> Iterator[tuple[str, str]]:
    """Store a value of the asked size under a fill key; count probes and emit each."""
    if key == "probe":
        state.set(state.get(0) + 1)
        yield key, value
    else:
        # Random hex, so RocksDB's compression cannot shrink the state below its size.
        state.set(os.urandom(int(value) // 2).hex())


def state_filler(params: dict[str, str]) -> Job:
    """Keyed state filled by ``fill`` records, probed by ``probe`` records."""
    j = Job(params["name"])
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(expand)
        .key_by(lambda kv: kv[0])
        .process(lambda key, kv, state: keep(key, kv[1], state), name="keep")
        .sink(KafkaSink(params["output"]))
    )
    return j
