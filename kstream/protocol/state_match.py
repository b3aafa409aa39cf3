"""Which keyed state of a savepoint a job takes: matched by name (pure, no I/O).

A keyed operator stores its state under ``s<stage>.<uid>``, its uid being its
name unless `Stream.uid` set one (`kstream.dataflow.graph.Node.state_name`).
Starting from a savepoint, each state the savepoint holds goes to the operator
with the same state name. An operator without state in the savepoint starts
empty (a new operator, or one that had none); state without an operator is
refused, unless the user allows it to be dropped
(``--allow-non-restored-state``): a rename without a uid would otherwise lose
the state silently and count from zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["StateMatch", "match_states"]


@dataclass(frozen=True, slots=True)
class StateMatch:
    """How the state names of a savepoint meet those of a job's operators."""

    #: In both: restored.
    restored: tuple[str, ...]
    #: In the savepoint only: no operator takes it.
    orphaned: tuple[str, ...]
    #: The job's only: starts empty.
    new: tuple[str, ...]

    def refusal(self, *, allow_non_restored_state: bool) -> str | None:
        """Why the savepoint cannot be taken (None: it can)."""
        if not self.orphaned or allow_non_restored_state:
            return None
        listed = ", ".join(self.orphaned)
        hint = f"; the job's keyed operators are {', '.join(self.new)}" if self.new else ""
        return (
            f"no operator of the job takes its state {listed}{hint}: give the renamed "
            "operator its old name as uid (.uid(...)), or pass --allow-non-restored-state "
            "to drop that state"
        )


def match_states(saved: Iterable[str], operators: Iterable[str]) -> StateMatch:
    """Match the state names a savepoint holds (`saved`) with a job's (`operators`)."""
    have, want = set(saved), set(operators)
    return StateMatch(
        tuple(sorted(have & want)), tuple(sorted(have - want)), tuple(sorted(want - have))
    )
