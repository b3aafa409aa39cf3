"""The running word count on real worker processes, with real SIGKILLs."""

from __future__ import annotations

import pytest
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.protocol.messages import Triggered, WorkerAlive
from kstream.runtime.control import read_messages
from kstream.runtime.runner.runner import RunningJob

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
        # A live stream, so each kill comes while output flows past the last
        # checkpoint: a backlog drained before the first kill replays nothing.
        rate=4000.0,
        hold_input_while_recovering=True,
    )
    assert outcome.kills == 2, messages
    assert outcome.check.wrong_final == []  # state is exactly-once whatever the sink does
    assert outcome.check.duplicates > 0  # replayed output: the checker sees it
    assert outcome.check.outputs == outcome.words + outcome.check.duplicates


def test_a_killed_worker_is_replaced_by_the_spare_process(bootstrap: str) -> None:
    spares: set[int] = set()
    workers: set[int] = set()

    def watch(runner: RunningJob) -> None:
        spare = runner.supervisor.spare
        if spare is not None and spare.poll() is None:
            spares.add(spare.pid)
        workers.update(runner.worker_pids().values())

    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        lines=20_000,
        kills=1,
        kill_after=1,
        checkpoint_interval=0.5,
        seed=13,
        chaos=watch,
        # A live stream, so the kill comes while input still flows.
        rate=4000.0,
        hold_input_while_recovering=True,
    )
    assert outcome.kills == 1, messages
    # The replacement is a process started before the kill, as the spare.
    assert spares & workers, (spares, workers, messages)
    assert_exactly_once(outcome)


def test_each_generations_first_checkpoint_follows_every_workers_restore(bootstrap: str) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        lines=20_000,
        kills=1,
        kill_after=1,
        # Far shorter than a worker's start or restore: the interval alone would
        # trigger each generation's first checkpoint while the workers restore.
        checkpoint_interval=0.1,
        seed=17,
        rate=4000.0,
        hold_input_while_recovering=True,
    )
    assert outcome.kills == 1, messages
    assert_exactly_once(outcome)
    job = "wordcount-" + outcome.input_topic.removesuffix("-words")
    restored: dict[int, set[str]] = {}
    first_trigger_after: dict[int, set[str]] = {}
    for m in read_messages(bootstrap, job):
        if isinstance(m, WorkerAlive) and not m.restoring:
            restored.setdefault(m.generation, set()).add(m.worker)
        if isinstance(m, Triggered) and m.generation not in first_trigger_after:
            first_trigger_after[m.generation] = set(restored.get(m.generation, set()))
    assert len(first_trigger_after) >= 2, first_trigger_after  # the start and the kill's
    for generation, workers in first_trigger_after.items():
        assert workers == {"w0", "w1", "w2"}, (generation, workers)
