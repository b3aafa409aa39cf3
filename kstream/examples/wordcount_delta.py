"""Running word count into a Delta table: one (word, count) row per update.

    kstream run kstream.examples.wordcount_delta:job -p input=words -p table=/tmp/word_counts

The word count of `kstream.examples.wordcount`, with `DeltaSink` instead of the
Kafka sink (needs the ``delta`` extra). Every update is a row, so the table holds
(word, 1), (word, 2), ..., (word, N) for each word: `kstream audit --table PATH
--delta --key word --value count` checks it like the Kafka sink's topic, and a
word's count is its row with the largest `count`.

The job's name defaults to ``wordcount-delta-<input>``: the name scopes
checkpoints, state and internal topics.
"""

from __future__ import annotations

from kstream import Job, KafkaSource
from kstream.examples.wordcount import count

#: The table's columns, in the order of the rows the job emits.
COLUMNS = {"word": "string", "count": "long"}


def job(params: dict[str, str]) -> Job:
    """The job; parameters `input`, `table` (a path or URI) and optionally `name`."""
    from kstream.connectors.delta import DeltaSink

    source = params.get("input", "words")
    j = Job(params.get("name", f"wordcount-delta-{source}"))
    (
        j.source(KafkaSource(source))
        .flat_map(str.split)
        .key_by(lambda word: word)
        .process(count, name="count")
        .sink(DeltaSink(params["table"], COLUMNS))
    )
    return j
