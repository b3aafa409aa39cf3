"""`request_snapshot()`: user code asks its source subtask to start a snapshot.

Called from a function of a source's stage (a `map`, `filter`, `flat_map` or
`process` before the first `key_by`), it asks the source subtask running that
function to start a snapshot of the whole job at the end of the current batch
(`kstream.protocol.initiation`). The subtask serves the request through a
context variable it sets while it pushes records (`serving`), so the function
needs no handle. Called anywhere else it raises `JobFailedError`: a channel
subtask has no offsets of its own to cut at, and only sources start snapshots.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from kstream.errors import JobFailedError

__all__ = ["request_snapshot", "server"]

#: The running source subtask's request hook (None: not inside a source's stage).
server: ContextVar[Callable[[], None] | None] = ContextVar("kstream_snapshot_server", default=None)


def request_snapshot() -> None:
    """Ask for a snapshot of the job, started by this source subtask after the current batch.

    Several requests before the batch ends start one snapshot.
    """
    serve = server.get()
    if serve is None:
        raise JobFailedError(
            "request_snapshot() was called outside a source's stage: only a function "
            "before the first key_by of a source can start a snapshot"
        )
    serve()
