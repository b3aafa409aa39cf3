"""kstream's job for the stateless workload (the word count is `kstream.examples.wordcount`).

kstream run benchmarks/jobs.py:mapfilter -p input=T -p output=T
"""

from __future__ import annotations

from kstream import Job, KafkaSink, KafkaSource

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
