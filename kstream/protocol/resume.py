"""Where a starting job resumes: its latest checkpoint, from scratch, or not at all.

Pure: `decide_resume` weighs what the control topic says (`History`), how the
job differs from the one that took the checkpoint (`resume_problems`'s two
lists), and the user's ``--fresh`` / ``--accept-changes``. The runner carries
out the answer: for `StartFresh` it discards the stored checkpoints and the
sources' consumer groups, for `Refuse` it stops with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kstream.protocol.coordination import History

__all__ = ["Refuse", "Resume", "StartFresh", "decide_resume"]


@dataclass(frozen=True, slots=True)
class Resume:
    """Coordinate from `history` (its latest completed checkpoint, if any).

    `warning`: said once when the checkpoint is resumed across changes.
    """

    history: History
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class StartFresh:
    """Start from scratch with `history`: no completed checkpoint, but the
    generation and checkpoint id keep increasing, so an earlier run's channel
    records, commit markers and zombie writers stay distinguishable from this
    run's. `notice` (None: nothing was forgotten) says what is forgotten."""

    history: History
    notice: str | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    """Do not start: `reason` says why and the ways on."""

    reason: str


def decide_resume(
    history: History,
    fatal: Sequence[str],
    changed: Sequence[str],
    *,
    job: str,
    fresh: bool,
    accept_changes: bool,
) -> Resume | StartFresh | Refuse:
    """Where job `job` starts, given the control topic's `history` and how the job
    differs from the one that recorded its latest completion: `fatal` differences
    can never be resumed across, `changed` ones only with `accept_changes`
    (`kstream.dataflow.identity.resume_problems`; ignored without a completion).
    """
    if fresh:
        notice = None
        if history.completed:
            notice = (
                f"starting job {job} fresh: checkpoints "
                f"{', '.join(map(str, history.completed))} are forgotten, sources read "
                "from their start position, state starts empty"
            )
        return StartFresh(History(history.generation, history.max_checkpoint), notice)
    if not history.completed:
        return Resume(history)
    n = history.completed[-1]
    if fatal:
        return Refuse(
            f"job {job} cannot resume checkpoint {n}: {'; '.join([*fatal, *changed])}. "
            "Start it from scratch with --fresh (state is dropped, input is read again), "
            "or use another --job-name (or the old settings)"
        )
    if changed and not accept_changes:
        return Refuse(
            f"job {job} differs from the job that took checkpoint {n}: "
            f"{'; '.join(changed)}. Start it from scratch with --fresh, use another "
            "--job-name, or, if the change is compatible with the state, resume on "
            "purpose with --accept-changes"
        )
    if changed:
        return Resume(
            history, f"WARNING: resuming checkpoint {n} across changes: {'; '.join(changed)}"
        )
    return Resume(history)
