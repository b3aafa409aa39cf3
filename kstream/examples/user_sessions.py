"""User sessions from clicks: per user, clicks less than `gap` apart.

    kstream run kstream.examples.user_sessions:job -p input=clicks -p output=sessions \
        [-p gap=30000] [-p lateness=0]

Input: `inputs.clicks`. Output: ``{"key": user, "start", "end", "value":
[clicks, [pages sorted]], "update"}`` per session once the watermark passes
its end; a session that absorbs a late-but-allowed click is emitted again,
wider, as an update (`references.final_results(..., merging=True)` keeps the
last). Too-late clicks go to the late topic.
"""

from __future__ import annotations

from typing import Any

from kstream import LATE, Job, TimeWindow, session
from kstream.examples.event_time import key_of, late_sink, output_sink, source, with_key

#: The input generator's bound (`inputs.clicks`).
OUT_OF_ORDERNESS_MS = 5_000


def summary(user: str, window: TimeWindow, clicks: tuple[Any, ...]) -> tuple[int, list[str]]:
    """The number of clicks and the pages, sorted (arrival order is not reproducible)."""
    return len(clicks), sorted(c["value"] for c in clicks)


def job(params: dict[str, str]) -> Job:
    """Parameters: `input`, `output`, optionally `late`, `name`, `gap`, `lateness`, `ooo`,
    `idle`."""
    topic = params.get("input", "clicks")
    j = Job(params.get("name", f"user-sessions-{topic}"))
    sessions = (
        j.source(source(topic, params, OUT_OF_ORDERNESS_MS))
        .key_by(key_of)
        .window(
            session(int(params.get("gap", 30_000))),
            allowed_lateness_ms=int(params.get("lateness", 0)),
        )
        .apply(summary)
    )
    sessions.map(with_key).sink(output_sink(params, "sessions"))
    sessions.side_output(LATE).sink(late_sink(params, "sessions"))
    return j
