"""What every benchmark's output reader is configured with, beyond its own settings.

A reader times the contenders, so it must never be what is measured. librdkafka
postpones a partition's next fetch by ``fetch.queue.backoff.ms`` (1 s by default)
once that partition's prefetch queue holds ``queued.min.messages`` (100,000)
records. Output that becomes visible in large steps, a transaction per
checkpoint or commit, fills it with one fetch, and a reader with the defaults
then saw each next step about a second late: 3 M words of kstream's exactly-once
word count took 15.5 s to read in full, against 10.8 s with a 10 ms backoff on
the same code, the sinks having committed everything 6 s before the end.
"""

from __future__ import annotations

from typing import Any

__all__ = ["READER_SETTINGS"]

#: Merged into every benchmark reader's consumer settings.
READER_SETTINGS: dict[str, Any] = {"fetch.queue.backoff.ms": 10}
