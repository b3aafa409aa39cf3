"""The running word count on real worker processes, with real SIGKILLs."""

from __future__ import annotations

import pytest
from rich.console import Console

from kstream.demo import wordcount_demo

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_state_is_exactly_once_across_random_worker_kills(bootstrap: str) -> None:
    messages: list[str] = []
    outcome = wordcount_demo(
        lines=40_000,
        workers=3,
        kills=3,
        bootstrap=bootstrap,
        checkpoint_interval=0.5,
        say=messages.append,
        console=Console(quiet=True),
        seed=11,
    )
    assert outcome.kills == 3, messages
    assert outcome.recoveries >= 3, messages
    # Every word's final count equals its occurrences in the input: no record
    # was counted twice or lost by the state, whatever the sink replayed.
    assert outcome.check.wrong_final == []
    assert outcome.check.missing == 0
    assert outcome.check.words > 1000
