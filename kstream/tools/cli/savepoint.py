"""`kstream savepoint`: ask a running job for a savepoint, and wait for it.

The request goes to the job's control topic (`SavepointRequested`); the job's
runner takes a checkpoint at once, copies it self-contained to the target
(`kstream.runtime.runner.savepoints`) and answers with a `SavepointDone`.
Progress goes to stderr, the savepoint's URL to stdout; each failure (no job
running, no answer in time, a failed copy) is one line and exit code 2.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

import typer

from kstream.errors import CheckpointError, ConfigurationError
from kstream.tools.cli.console import out, say
from kstream.tools.cli.options import (
    POSITIVE,
    BootstrapOption,
    KafkaConfigOption,
    RequiredJobNameOption,
)

__all__ = ["savepoint_command"]


def savepoint_command(
    job_name: RequiredJobNameOption,
    target: Annotated[
        str,
        typer.Option(
            "--target",
            help="Where to write it: file:///abs/dir or s3://bucket/prefix (default: "
            "savepoints/<job>-<checkpoint>-<time> in the job's checkpoint storage).",
        ),
    ] = "",
    stop: Annotated[
        bool,
        typer.Option(
            "--stop", help="Stop the job once the savepoint is written (sinks committed)."
        ),
    ] = False,
    timeout_s: Annotated[
        float,
        typer.Option("--timeout-s", help="Give up after this many seconds.", callback=POSITIVE),
    ] = 300.0,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
) -> None:
    """Take a savepoint of a running job: a self-contained copy of a checkpoint taken
    now, from which `kstream run --from-savepoint` starts a job (any name, any
    number of workers). Prints its URL."""
    from kstream.infra.admin import Admin
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.messages import (
        Completed,
        Presence,
        SavepointDone,
        SavepointRequested,
        Triggered,
    )
    from kstream.protocol.presence import last_presence, needs_wait
    from kstream.runtime.checkpoint.savepoint import parse_savepoint_url
    from kstream.runtime.control import ControlReader, ControlWriter, read_messages

    if target:
        parse_savepoint_url(target)
    bootstrap = resolve(bootstrap_servers, say)
    Admin(bootstrap).check_reachable()
    history = read_messages(bootstrap, job_name)
    if not history:
        raise ConfigurationError(f"job {job_name!r} has no control topic: it never ran here")
    if not needs_wait(last_presence(history), time.time()):
        raise ConfigurationError(f"job {job_name!r} is not running: no savepoint can be taken")
    request = uuid.uuid4().hex[:12]
    reader = ControlReader.at_end(bootstrap, job_name, f"kstream-savepoint-{request}")
    writer = ControlWriter(bootstrap, job_name)
    try:
        reader.end_offset()  # placed before the request is written
        writer.send(SavepointRequested(request, target, stop, time=time.time()))
        say(f"savepoint {request} of job {job_name} requested")
        deadline = time.monotonic() + timeout_s
        mine: int | None = None
        while (left := deadline - time.monotonic()) > 0:
            for _, msg in reader.poll(min(left, 1.0)):
                match msg:
                    case Triggered() if mine is None:
                        mine = msg.checkpoint
                        say(f"checkpoint {mine} triggered")
                    case Completed() if msg.checkpoint == mine:
                        say(f"checkpoint {mine} complete; writing the savepoint")
                    case SavepointDone() if msg.request == request:
                        if msg.error:
                            raise CheckpointError(f"savepoint of job {job_name}: {msg.error}")
                        say(f"savepoint of checkpoint {msg.checkpoint} written")
                        if stop:
                            say(f"job {job_name} stops")
                        out.print(msg.url, highlight=False, markup=False, soft_wrap=True)
                        return
                    case Presence(stopped=True):
                        raise ConfigurationError(
                            f"job {job_name} stopped before its savepoint was written"
                        )
                    case _:
                        pass
        raise CheckpointError(
            f"no savepoint of job {job_name} within {timeout_s:g}s (is its runner busy or "
            "stuck? see its output); the request stands until the job serves it"
        )
    finally:
        reader.close()
