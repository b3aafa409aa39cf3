"""Resuming a job at another parallelism: what the runner does before the workers start.

The workers split and merge the state themselves (`kstream.runtime.checkpoint.restore`);
the runner decides that a start is a rescale (the newest completed checkpoint
was taken with key groups at another parallelism per stage), refuses with one
line what cannot be rescaled (no key groups; recorded channel state of an
unaligned checkpoint), and lays out the internal topics anew: channel topics
have ``U x D`` partitions, so they are deleted and created again at the new
layout (their records belong to the old channels; the restore reads none of
them), and the commit-marker topic keeps every partition it has (it holds the
old subtasks' markers, which their successors read) and grows if the new
layout needs more.
"""

from __future__ import annotations

from collections.abc import Callable

from kstream.dataflow.plan import Plan
from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin
from kstream.protocol.coordination import History
from kstream.protocol.names import commit_topic
from kstream.runtime.checkpoint.storage import CheckpointStorage

__all__ = ["relayout_topics", "rescaled_from"]


def rescaled_from(history: History, plan: Plan, *, fresh: bool) -> Plan | None:
    """The plan the checkpoint to resume was taken with, when it is to be rescaled
    to `plan`; None when the start is fresh, resumes nothing, or keeps the layout.

    A checkpoint without key groups (recorded without a max parallelism) is
    None here: `kstream.protocol.identity.resume_problems` refuses its change
    of parallelism with its own line.
    """
    ident = history.identity
    if fresh or not history.completed or ident is None or not ident.max_parallelism:
        return None
    if ident.parallelism == plan.parallelism or len(ident.parallelism) != len(plan.parallelism):
        return None
    return Plan(plan.job, plan.workers, ident.parallelism)


def check_rescalable(storage: CheckpointStorage, before: Plan, checkpoint: int) -> None:
    """Refuse, with one line, to rescale checkpoint `checkpoint` (taken at `before`'s
    layout) when it cannot be: a snapshot without key groups or with recorded
    channel state."""
    name = before.job.name
    for task in before.tasks:
        meta = storage.load(checkpoint, task.id)
        # Only key format 3 records a max parallelism (its key groups).
        if not meta.max_parallelism:
            raise ConfigurationError(
                f"job {name}: checkpoint {checkpoint} has no key groups (key format "
                f"{meta.key_format}) and cannot be rescaled: run it with its parallelism "
                f"{list(before.parallelism)}, or start it fresh (--fresh)"
            )
        if meta.channel_replay:
            raise ConfigurationError(
                f"job {name}: checkpoint {checkpoint} recorded channel state (unaligned) and "
                f"cannot be rescaled: run it with its parallelism {list(before.parallelism)} "
                "and rescale from a later aligned checkpoint"
            )


def relayout_topics(
    admin: Admin, before: Plan, after: Plan, say: Callable[[str], None] = print
) -> None:
    """Delete the channel topics of layout `before` (the preflight creates those of
    `after`) and grow the commit-marker topic to what `after` needs."""
    channels = sorted(set(before.channel_topics()) & admin.topics())
    admin.delete_topics(channels)
    topic = commit_topic(after.job.name)
    have = admin.partitions(topic) or 0
    need = after.internal_topics()[topic]
    if have and have < need:
        admin.add_partitions(topic, need)
    say(
        f"job {after.job.name}: rescaling from parallelism {list(before.parallelism)} to "
        f"{list(after.parallelism)}; channel topics are laid out anew"
    )
