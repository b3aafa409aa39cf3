"""Visits enriched with the visitor's profile as of the visit, from a table topic.

    kstream run kstream.examples.visit_enrichment:job -p visits=visits \
        -p profiles=profiles -p output=enriched [-p compacted=false]

Input: `inputs.profiles_and_visits`; `profiles` is a table topic (keyed by
user, compacted: the run is refused otherwise unless ``-p
compacted=false``), a value None being a tombstone. Output: ``{"key":
user, "value": visit record, "table": profile record or null, "timestamp"}``
per visit once the watermark passed it (`references.enrichment`). Too-late
records of either side go to the late topic with ``"side"``.
"""

from __future__ import annotations

from kstream import LATE, Job
from kstream.examples.event_time import key_of, late_sink, output_sink, source

#: The input generator's bound (`inputs.profiles_and_visits`).
OUT_OF_ORDERNESS_MS = 2_000


def job(params: dict[str, str]) -> Job:
    """Parameters: `visits`, `profiles`, `output`, optionally `late`, `name`, `compacted`,
    `ooo`, `idle`."""
    visits, profiles = params.get("visits", "visits"), params.get("profiles", "profiles")
    j = Job(params.get("name", f"visit-enrichment-{visits}-{profiles}"))
    enriched = (
        j.source(source(visits, params, OUT_OF_ORDERNESS_MS))
        .key_by(key_of)
        .enrich(
            j.source(source(profiles, params, OUT_OF_ORDERNESS_MS)).key_by(key_of),
            compacted=params.get("compacted", "true") != "false",
        )
    )
    enriched.sink(output_sink(params, "enriched"))
    enriched.side_output(LATE).sink(late_sink(params, "enriched"))
    return j
