"""The runner's side of savepoints: requests in, savepoints out.

`kstream savepoint` writes a `SavepointRequested` to the job's control topic.
The runner (`Savepoints.requested`) asks its coordinator for a checkpoint at
once (`Coordinator.request_checkpoint`); the first checkpoint triggered after
the request that completes with every snapshot aligned is the savepoint's. A
request whose checkpoint is aborted, rolled back or taken unaligned waits for
the next one (asked for at once). The copy (`write_savepoint`) runs on a
thread of its own, off the coordinator's loop, from a storage of its own; the
checkpoint it copies is kept from retention until it is done (`protected`).
Its outcome is a `SavepointDone` on the control topic.

With ``stop``, once the savepoint's checkpoint completed the runner holds the
job (`holding()`: no further checkpoint is triggered or completes, so the output
committed is exactly the savepoint's), and once the savepoint is written the
job is `finished`: the runner stops its workers, which commit the sinks of
that checkpoint on their way out. A failed copy releases the hold.

A job whose snapshots record channel state (``--alignment unaligned``) takes
no savepoint: channel state cannot be split across another parallelism, so
such a request is refused at once.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from dataclasses import dataclass

from kstream.dataflow.graph import children
from kstream.dataflow.identity import state_names
from kstream.dataflow.plan import Plan
from kstream.errors import KStreamError
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.identity import JobIdentity
from kstream.protocol.messages import Acked, ControlMessage, SavepointDone, SavepointRequested
from kstream.runtime.checkpoint.open import open_storage
from kstream.runtime.checkpoint.savepoint import (
    FORMAT_VERSION,
    SavepointInfo,
    default_target,
    write_savepoint,
)
from kstream.runtime.config import RunConfig

__all__ = ["Savepoints"]

log = logging.getLogger("kstream.runner")


@dataclass(slots=True)
class _Request:
    message: SavepointRequested
    #: The checkpoint that will be its savepoint (None: not triggered yet).
    checkpoint: int | None = None


class Savepoints:
    """The savepoint requests of one running job (see the module's docstring)."""

    def __init__(
        self,
        config: RunConfig,
        plan: Plan,
        identity: JobIdentity,
        coordinator: Coordinator,
        send: Callable[[ControlMessage], None],
        say: Callable[[str], None],
    ) -> None:
        self.config = config
        self.plan = plan
        self.identity = identity
        self.coordinator = coordinator
        self.send = send
        self.say = say
        self._requests: list[_Request] = []
        self._writing: dict[int, tuple[list[_Request], Future[str]]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._holding = False
        #: A stop savepoint is written: the job is to stop.
        self.finished = False

    def holding(self) -> bool:
        """A stop savepoint's checkpoint completed: nothing more may complete."""
        return self._holding

    @property
    def protected(self) -> set[int]:
        """Checkpoints being copied: retention must not delete them yet."""
        return set(self._writing)

    def requested(self, message: SavepointRequested) -> None:
        if any(r.message.request == message.request for r in self._requests):
            return  # read twice
        if self.config.alignment is Alignment.UNALIGNED:
            self._outcome(
                message,
                None,
                error=(
                    "this job takes unaligned checkpoints (--alignment unaligned), whose "
                    "channel state cannot be rescaled; run it aligned to take a savepoint"
                ),
            )
            return
        self.say(f"savepoint {message.request} requested; triggering a checkpoint")
        unnamed = [n for n in state_names(self.plan.job) if n not in self._uids()]
        if unnamed:
            self.say(
                f"WARNING: keyed operators without .uid(...): {', '.join(unnamed)}; their "
                "state is found again by name only (a rename loses it)"
            )
        self._requests.append(_Request(message))
        self.coordinator.request_checkpoint()

    def _uids(self) -> set[str]:
        """The state names set by `Stream.uid`."""
        named: set[str] = set()
        for stage in self.plan.job.stages:
            todo = [stage.root]
            while todo:
                node = todo.pop()
                if node.uid:
                    named.add(f"s{stage.index}.{node.uid}")
                todo.extend(children(node))
        return named

    def triggered(self, checkpoint: int) -> None:
        for r in self._requests:
            if r.checkpoint is None:
                r.checkpoint = checkpoint

    def aborted(self, checkpoint: int) -> None:
        """Checkpoint `checkpoint` was aborted (or rolled back): its requests wait again."""
        again = False
        for r in self._requests:
            if r.checkpoint == checkpoint:
                r.checkpoint, again = None, True
        if again:
            self.coordinator.request_checkpoint()

    def recovered(self) -> None:
        """A new generation: every checkpoint pending was rolled back."""
        for r in self._requests:
            if r.checkpoint is not None:
                self.aborted(r.checkpoint)

    def completed(self, checkpoint: int, acks: Iterable[Acked]) -> None:
        mine = [r for r in self._requests if r.checkpoint == checkpoint]
        if not mine:
            return
        if any(a.unaligned for a in acks):
            self.say(
                f"checkpoint {checkpoint} was taken unaligned; the savepoint waits for the next"
            )
            self.aborted(checkpoint)
            return
        self._requests = [r for r in self._requests if r.checkpoint != checkpoint]
        if any(r.message.stop for r in mine):
            self._holding = True
        target = next((r.message.target for r in mine if r.message.target), "")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="savepoint")
        self.say(f"writing a savepoint of checkpoint {checkpoint}")
        self._writing[checkpoint] = (mine, self._pool.submit(self._write, checkpoint, target))
        # Other requests of the same checkpoint with another target get the next one.

    def _write(self, checkpoint: int, target: str) -> str:
        storage = open_storage(self.config, self.plan.job.name, probe=False)
        stages = self.plan.job.stages
        info = SavepointInfo(
            version=FORMAT_VERSION,
            job=self.plan.job.name,
            checkpoint=checkpoint,
            identity=self.identity,
            max_parallelism=self.identity.max_parallelism,
            parallelism=tuple(self.plan.parallelism[s.index] for s in stages),
            state_serde=self.plan.job.state_serde.name,
            time=time.time(),
            states=state_names(self.plan.job),
        )
        return write_savepoint(
            storage,
            info.tasks,
            target or default_target(storage, self.plan.job.name, checkpoint),
            info,
            s3_endpoint_url=self.config.s3_endpoint_url,
            scratch=self.config.state_dir.resolve(),
        )

    def wait(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for a copy under way to end."""
        futures = [f for _, f in self._writing.values()]
        if futures:
            concurrent.futures.wait(futures, timeout, return_when=FIRST_COMPLETED)

    def poll(self) -> list[int]:
        """Send the outcome of every copy that ended; return their checkpoints."""
        ended = [n for n, (_, f) in self._writing.items() if f.done()]
        for n in ended:
            requests, future = self._writing.pop(n)
            try:
                url = future.result()
            except KStreamError as exc:
                url, error = "", str(exc)
            except Exception as exc:  # an unforeseen failure is still one line
                log.exception("writing the savepoint of checkpoint %s failed", n)
                url, error = "", f"{type(exc).__name__}: {exc}"
            else:
                error = ""
            for r in requests:
                self._outcome(r.message, n, url=url, error=error)
            stops = any(r.message.stop for r in requests)
            if error:
                self.say(f"savepoint of checkpoint {n} failed: {error}")
                self._holding = self._holding and not stops
            else:
                self.say(f"savepoint of checkpoint {n} written to {url}")
                self.finished = self.finished or stops
        return ended

    def _outcome(
        self, message: SavepointRequested, n: int | None, *, url: str = "", error: str = ""
    ) -> None:
        self.send(SavepointDone(message.request, n, url, error, time=time.time()))

    def close(self) -> None:
        """The job stops: copies under way finish; requests not served are failed."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self.poll()
        for r in self._requests:
            self._outcome(r.message, None, error="the job stopped before the savepoint was taken")
        self._requests.clear()
