"""A rollback that arrives while a sink waits must never be taken for a failed record."""

from __future__ import annotations

import pytest

from kstream.dataflow.outputs import RollbackInterrupt


def user_function_that_catches_everything(pump: object) -> str:
    """What user code often does around a call that can fail."""
    try:
        pump()  # type: ignore[operator]
    except Exception:
        return "swallowed"
    return "finished"


def test_the_interrupt_passes_through_except_exception() -> None:
    def pump() -> None:
        raise RollbackInterrupt

    # The runtime's error policy and user functions catch `Exception` around the
    # chain; a subclass of it would dead-letter the record being processed.
    with pytest.raises(RollbackInterrupt):
        user_function_that_catches_everything(pump)
