"""The Quix Streams contender: the suite's two jobs written with Quix Streams.

    <quix venv>/bin/python benchmarks/quix_job.py \
        BOOTSTRAP INPUT OUTPUT WORKLOAD GUARANTEE STATE_DIR

Runs in its own virtualenv (Quix Streams pins its own confluent-kafka), so it
imports nothing from kstream or the suite. Runs until SIGTERM.
"""

from __future__ import annotations

import sys
import uuid

from quixstreams import Application, State

#: Same rule as `benchmarks.workloads.keep`.
DROPPED_LAST_CHARS = "13579"


def count(word: str, state: State) -> str:
    n: int = state.get("n", 0) + 1
    state.set("n", n)
    return str(n)


def main() -> None:
    bootstrap, src, dst, workload, guarantee, state_dir = sys.argv[1:7]
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
        processing_guarantee=guarantee,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        loglevel="WARNING",
    )
    source = app.topic(src, key_deserializer="bytes", value_deserializer="str")
    sink = app.topic(dst, key_serializer="str", value_serializer="str")
    sdf = app.dataframe(source).apply(lambda line: line.split(), expand=True)
    if workload == "wordcount":
        sdf = sdf.group_by(lambda word: word, name="word").apply(count, stateful=True)
        sdf.to_topic(sink)
    else:
        sdf = sdf.filter(lambda word: word[-1] not in DROPPED_LAST_CHARS).apply(str.upper)
        # Generated words are lower-case: lower() restores the word as the key.
        sdf.to_topic(sink, key=lambda upper: upper.lower())
    app.run()


if __name__ == "__main__":
    main()
