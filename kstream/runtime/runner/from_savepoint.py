"""``kstream run --from-savepoint URL``: a savepoint becomes the job's first checkpoint.

Before anything else reads the control topic (`Runner.prepare`), the runner
checks the savepoint (`kstream.runtime.checkpoint.savepoint.open_savepoint`:
present, complete, of this format, every snapshot intact) and whether this job
may take it (`refusals`: max parallelism, state serde, job identity, channel
state), then imports it: each snapshot is copied into the job's checkpoint
storage as checkpoint `m` (a fresh id after every id the job has seen) and a
`Completed(m)` carrying the savepoint's job identity is written to the job's
control topic. From there the start is an ordinary resume, at the savepoint's
parallelism or another (`kstream.runtime.runner.rescale`).

What the copy leaves out, and why:

* channel offsets: they name the channel topics of the job that took the
  savepoint (another job name, another layout); an aligned cut leaves nothing
  in flight that the sources do not produce again, so the channels start empty;
* what the sinks kept (``SnapshotMeta.sink``: pending epochs, their commit
  markers) and their write-ahead copies: the epochs a savepoint keeps are the
  taking job's output, committed by that job (at once with ``--stop``);
  publishing them again under this job's name would duplicate them, and their
  markers are in the taking job's commit-marker topic, not this job's (a
  resume would look for them there and refuse the checkpoint as one whose
  topic was deleted).

Only a job name without a completed checkpoint takes a savepoint: one with
checkpoints resumes its own (a job stopped by ``kstream savepoint --stop``
resumes exactly its savepoint's checkpoint without this option).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kstream.dataflow.identity import state_names
from kstream.dataflow.plan import Plan
from kstream.errors import ConfigurationError, IdentityMismatchError
from kstream.infra.admin import Admin
from kstream.protocol.coordinator import replay
from kstream.protocol.identity import JobIdentity, resume_problems
from kstream.protocol.limits import INTERNAL_TOPIC_MAX_BYTES, MAX_MESSAGE_BYTES
from kstream.protocol.messages import Completed
from kstream.protocol.names import control_topic
from kstream.protocol.snapshot_id import COORDINATOR, LamportClock
from kstream.protocol.state_match import match_states
from kstream.runtime.checkpoint.savepoint import SavepointInfo, open_savepoint
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage
from kstream.runtime.config import RunConfig
from kstream.runtime.control import ControlWriter, read_log
from kstream.runtime.runner.preflight import INTERNAL_SEGMENT_MS

__all__ = ["import_savepoint", "refusals"]


def refusals(
    info: SavepointInfo,
    identity: JobIdentity,
    state_serde: str,
    states: tuple[str, ...],
    *,
    accept_changes: bool,
    allow_non_restored_state: bool,
) -> list[str]:
    """Why a job of `identity`, `state_serde` and keyed state names `states`
    (`kstream.dataflow.identity.state_names`) cannot start from savepoint `info`
    (empty: it can). Operators may differ as long as every state of the savepoint
    has an operator (`kstream.protocol.state_match`); other sources, sinks or edges
    need `accept_changes`."""
    problems: list[str] = []
    if info.max_parallelism != identity.max_parallelism:
        problems.append(
            f"it has {info.max_parallelism} key groups (max parallelism), the job "
            f"{identity.max_parallelism}: the number of key groups is fixed for the life "
            "of the state"
        )
    if info.state_serde != state_serde:
        problems.append(
            f"its state is encoded with {info.state_serde!r}, the job's state serde is "
            f"{state_serde!r}"
        )
    fatal, _ = resume_problems(info.identity, identity)
    problems += [p for p in fatal if not p.startswith("max parallelism")]
    old, new = info.identity, identity
    changed = [
        f"{what} {', '.join(a) or '-'} -> {', '.join(b) or '-'}"
        for what, a, b in (
            ("sources", old.sources, new.sources),
            ("sinks", old.sinks, new.sinks),
            ("edges", old.edges, new.edges),
        )
        if a != b
    ]
    if changed and not accept_changes:
        problems.append(
            f"it was taken by another job ({'; '.join(changed)}); pass --accept-changes "
            "if the change is compatible"
        )
    unmatched = match_states(info.states, states).refusal(
        allow_non_restored_state=allow_non_restored_state
    )
    if unmatched is not None:
        problems.append(unmatched)
    return problems


def import_savepoint(
    config: RunConfig,
    plan: Plan,
    identity: JobIdentity,
    storage: ManagedCheckpointStorage,
    say: Callable[[str], None],
) -> int:
    """Import the savepoint `config.start.from_savepoint` as job `plan.job`'s first
    checkpoint; return its id. Raises `IdentityMismatchError` or
    `ConfigurationError` (one line, nothing written) when it cannot be taken,
    `CheckpointError` when it is missing or damaged."""
    url = config.start.from_savepoint
    name = plan.job.name
    source, info = open_savepoint(url, s3_endpoint_url=config.s3_endpoint_url)
    problems = refusals(
        info,
        identity,
        plan.job.state_serde.name,
        state_names(plan.job),
        accept_changes=config.start.accept_changes,
        allow_non_restored_state=config.start.allow_non_restored_state,
    )
    if problems:
        raise IdentityMismatchError(
            f"job {name} cannot start from savepoint {url}: {'; '.join(problems)}"
        )
    metas = [source.load(info.checkpoint, task) for task in info.tasks]
    if any(m.channel_replay for m in metas):
        raise ConfigurationError(
            f"savepoint {url} recorded channel state (an unaligned checkpoint): it cannot "
            "be started from"
        )
    messages = [m for _, m in read_log(config.bootstrap, name)]
    history = replay(messages, config.checkpoints.retained)
    if history.completed:
        raise ConfigurationError(
            f"job {name} has checkpoints of its own (latest {history.completed[-1]}): start "
            "the savepoint under a new --job-name, or run without --from-savepoint to "
            "resume the job's latest checkpoint"
        )
    seen = max(history.max_checkpoint, info.checkpoint, *storage.completed(), 0)
    m = LamportClock(seen).tick(COORDINATOR)
    say(f"job {name}: importing savepoint {url} (checkpoint {info.checkpoint}) as checkpoint {m}")
    work = Path(tempfile.mkdtemp(prefix="from-savepoint-", dir=config.state_dir))
    try:
        for meta in metas:
            db = work / meta.task
            has_db = source.fetch_db(info.checkpoint, meta.task, db)
            # Taken by this job from now on: the match above decided it may take it.
            mine = dataclasses.replace(
                meta,
                checkpoint=m,
                channel_offsets={},
                channel_replay={},
                sink={},
                identity=identity.fingerprint,
            )
            storage.store(
                mine,
                db if has_db else None,
                None,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # The preflight creates the job's internal topics later; the completion needs its
    # topic now, made as the preflight makes it.
    Admin(config.bootstrap).create_topics(
        {control_topic(name): 1},
        {
            MAX_MESSAGE_BYTES: str(INTERNAL_TOPIC_MAX_BYTES),
            "segment.ms": str(INTERNAL_SEGMENT_MS),
        },
    )
    # This job's identity at the savepoint's layout: a start at another one rescales.
    taken = dataclasses.replace(identity, parallelism=info.parallelism)
    completed = Completed(m, history.generation, time=time.time(), identity=taken)
    ControlWriter(config.bootstrap, name).send(completed)
    return m
