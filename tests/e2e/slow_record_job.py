"""A 1:1 job whose user function takes `params["pause"]` seconds on the line "slow":
longer than the liveness timeout the test runs the job with."""

from __future__ import annotations

import time

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job


def job(params: dict[str, str]) -> Job:
    pause = float(params["pause"])

    def work(line: str) -> str:
        if line == "slow":
            time.sleep(pause)  # the user's slow call (a remote lookup, say), not a wait
        return line.upper()

    j = Job(params["name"])
    j.source(KafkaSource(params["input"])).map(work).sink(KafkaSink(params["output"]))
    return j
