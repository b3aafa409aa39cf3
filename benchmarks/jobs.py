"""kstream's jobs for the stateless and the windowed workloads (the word count is
`kstream.examples.wordcount`).

kstream run benchmarks/jobs.py:mapfilter -p input=T -p output=T
kstream run benchmarks/jobs.py:windowed -p input=T -p output=T -p size=10000
"""

from __future__ import annotations

from typing import Any

from kstream import Job, KafkaSink, KafkaSource, tumbling

#: Same rule as `benchmarks.workloads.keep` (this file is loaded by path, outside the package).
DROPPED_LAST_CHARS = "13579"


def mapfilter(params: dict[str, str]) -> Job:
    """Split lines into words, drop words ending in an odd digit, emit (word, WORD)."""
    j = Job(params.get("name", f"mapfilter-{params['input']}-{params['output']}"))
    (
        j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .filter(lambda word: word[-1] not in DROPPED_LAST_CHARS)
        .map(lambda word: (word, word.upper()))
        .sink(KafkaSink(params["output"]))
    )
    return j


#: The windowed input's timestamps rise in every partition (`benchmarks.workloads`):
#: no out-of-orderness to wait for, and nothing is ever late.
OUT_OF_ORDERNESS_MS = 0
#: Every partition ends with its flush line, so no partition needs to be declared idle;
#: an idle partition that resumed behind the watermark would find its windows closed.
IDLE_TIMEOUT_MS = 24 * 3_600_000


def _window_output(result: dict[str, Any]) -> tuple[str, str]:
    return result["key"], f"{result['start']} {result['value']}"


def windowed(params: dict[str, str]) -> Job:
    """Count each word per tumbling window of `size` ms (event time: the Kafka timestamp);
    emit (word, "<window start> <count>") once the watermark passes the window's end."""
    j = Job(params.get("name", f"windowed-{params['input']}-{params['output']}"))
    source = KafkaSource(
        params["input"],
        timestamps="kafka",
        out_of_orderness_ms=OUT_OF_ORDERNESS_MS,
        idle_timeout_ms=IDLE_TIMEOUT_MS,
    )
    (
        j.source(source)
        .flat_map(str.split)
        .key_by(lambda word: word)
        .window(tumbling(int(params["size"])))
        .count()
        .map(_window_output)
        .sink(KafkaSink(params["output"]))
    )
    return j
