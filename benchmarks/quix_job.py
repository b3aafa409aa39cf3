"""The Quix Streams contender: the suite's jobs written with Quix Streams.

    <quix venv>/bin/python benchmarks/quix_job.py \
        BOOTSTRAP INPUT OUTPUT WORKLOAD GUARANTEE STATE_DIR GROUP WINDOW_MS GRACE_MS

Runs in its own virtualenv (Quix Streams pins its own confluent-kafka), so it
imports nothing from kstream or the suite. Runs until SIGTERM. The windowed
count (event time: the Kafka timestamp) emits each window's count once, when
the key's stream time passes its end and the grace (`.final()`).
"""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State

#: Same rule as `benchmarks.workloads.keep`.
DROPPED_LAST_CHARS = "13579"


def count(word: str, state: State) -> str:
    n: int = state.get("n", 0) + 1
    state.set("n", n)
    return str(n)


def window_value(result: dict[str, Any]) -> str:
    return f"{result['start']} {result['value']}"


def main() -> None:
    bootstrap, src, dst, workload, guarantee, state_dir, group = sys.argv[1:8]
    window_ms, grace_ms = map(int, sys.argv[8:10])
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        processing_guarantee=guarantee,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        loglevel="WARNING",
    )
    source = app.topic(src, key_deserializer="bytes", value_deserializer="str")
    sink = app.topic(dst, key_serializer="str", value_serializer="str")
    sdf = app.dataframe(source).apply(lambda line: line.split(), expand=True)
    if workload == "windowed":
        sdf = (
            sdf.group_by(lambda word: word, name="word")
            .tumbling_window(duration_ms=window_ms, grace_ms=grace_ms)
            .count()
            .final()
            .apply(window_value)
        )
        sdf.to_topic(sink)
    elif workload == "wordcount":
        sdf = sdf.group_by(lambda word: word, name="word").apply(count, stateful=True)
        sdf.to_topic(sink)
    else:
        sdf = sdf.filter(lambda word: word[-1] not in DROPPED_LAST_CHARS).apply(str.upper)
        # Generated words are lower-case: lower() restores the word as the key.
        sdf.to_topic(sink, key=lambda upper: upper.lower())
    app.run()


if __name__ == "__main__":
    main()
