"""The running word count on real worker processes, with real SIGKILLs."""

from __future__ import annotations

import pytest
from wordcount_runs import assert_exactly_once, run_wordcount

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_state_and_output_are_exactly_once_across_random_worker_kills(bootstrap: str) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap, messages, lines=40_000, kills=3, checkpoint_interval=0.5, seed=11
    )
    assert outcome.kills == 3, messages
    assert outcome.recoveries >= 3, messages
    assert_exactly_once(outcome)


def test_at_least_once_output_shows_the_duplicates_the_checker_counts(bootstrap: str) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        lines=20_000,
        kills=2,
        checkpoint_interval=1.0,
        seed=5,
        guarantee="at-least-once",
    )
    assert outcome.kills == 2, messages
    assert outcome.check.wrong_final == []  # state is exactly-once whatever the sink does
    assert outcome.check.duplicates > 0  # replayed output: the checker sees it
    assert outcome.check.outputs == outcome.words + outcome.check.duplicates
