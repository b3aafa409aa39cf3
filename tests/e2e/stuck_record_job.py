"""A 1:1 job whose user function blocks for good on the line "stuck", the first time
any process meets it: it creates the file `params["marker"]` (exclusively, so only one
process ever succeeds) and then waits on an event nobody sets, as a call on a dead
socket or a lock never released would. Only killing the process ends that wait; a
process that finds the marker already there passes the line like any other. With
``-p always=1`` every process that meets the line blocks on it: a call that never
returns, whatever process makes it."""

from __future__ import annotations

import os
import threading

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job


def job(params: dict[str, str]) -> Job:
    marker = params["marker"]
    always = params.get("always") == "1"

    def work(line: str) -> str:
        if line == "stuck":
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                if always:
                    threading.Event().wait()  # met before, and stuck again
                # met before, by a process since replaced
            else:
                threading.Event().wait()  # never set: stuck for good
        return line.upper()

    j = Job(params["name"])
    j.source(KafkaSource(params["input"])).map(work).sink(KafkaSink(params["output"]))
    return j
