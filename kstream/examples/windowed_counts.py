"""Windowed counts per key, tumbling and sliding.

    kstream run kstream.examples.windowed_counts:job -p input=events -p output=counts \
        [-p window=tumbling|sliding] [-p size=2000] [-p slide=1000] [-p lateness=0]

Input: `inputs.keyed_events` (see `kstream.examples.event_time` for the
format). Output: one ``{"key", "start", "end", "value": count, "update"}``
per window when the watermark passes its end, and again (``"update":
true``) for every record within the allowed lateness after that; the last
one per window is `references.windowed_counts`' result. Each is written with
its key (`event_time.with_key`), so a key's results keep their order. Too-late
records go to the late topic.
"""

from __future__ import annotations

from kstream import LATE, Job, Sliding, Tumbling, sliding, tumbling
from kstream.examples.event_time import key_of, late_sink, output_sink, source, with_key

#: The input generator's bound (`inputs.keyed_events`).
OUT_OF_ORDERNESS_MS = 1_000


def assigner(params: dict[str, str]) -> Tumbling | Sliding:
    size = int(params.get("size", 2_000))
    if params.get("window", "tumbling") == "sliding":
        return sliding(size, int(params.get("slide", 1_000)))
    return tumbling(size)


def job(params: dict[str, str]) -> Job:
    """Parameters: `input`, `output`, optionally `late`, `name`, `window`, `size`, `slide`,
    `lateness`, `ooo`, `idle`."""
    topic = params.get("input", "events")
    j = Job(params.get("name", f"windowed-counts-{topic}"))
    counts = (
        j.source(source(topic, params, OUT_OF_ORDERNESS_MS))
        .key_by(key_of)
        .window(assigner(params), allowed_lateness_ms=int(params.get("lateness", 0)))
        .count()
    )
    counts.map(with_key).sink(output_sink(params, "counts"))
    counts.side_output(LATE).sink(late_sink(params, "counts"))
    return j
