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
    assert outcome.check.words > 1000
    # Exactly-once output: each word's outputs read with read_committed are 1..N.
    assert outcome.check.duplicates == 0
    assert outcome.check.missing == 0
    assert outcome.check.out_of_order == 0
    assert outcome.check.outputs == outcome.words


def test_at_least_once_output_shows_the_duplicates_the_checker_counts(bootstrap: str) -> None:
    outcome = wordcount_demo(
        lines=20_000,
        workers=3,
        kills=2,
        bootstrap=bootstrap,
        checkpoint_interval=1.0,
        say=lambda _: None,
        console=Console(quiet=True),
        seed=5,
        guarantee="at-least-once",
    )
    assert outcome.kills == 2
    assert outcome.check.wrong_final == []  # state is exactly-once whatever the sink does
    assert outcome.check.duplicates > 0  # replayed output: the checker sees it
    assert outcome.check.outputs == outcome.words + outcome.check.duplicates
