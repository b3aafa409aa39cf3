"""`kstream.runtime.failure`: which failures of a worker a restart can get past."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kstream.errors import (
    AuthorizationError,
    CheckpointError,
    JobFailedError,
    KafkaUnavailableError,
    ProducerFencedError,
    RecordLostError,
    SpecError,
    StateValueError,
)
from kstream.runtime.failure import Failure, classify, read_cause, write_cause


def raised(exc: BaseException) -> BaseException:
    """`exc` as it arrives in the worker: raised, with a traceback."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def user_function_exiting(code: int) -> None:
    sys.exit(code)


def user_function_interrupted() -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (StateValueError("state s1 holds a set"), "state s1 holds a set"),
        (SpecError("cannot import module 'x'"), "cannot import module 'x'"),
        (AuthorizationError("denied: WRITE on t"), "denied: WRITE on t"),
        (JobFailedError("s1-0: ValueError: bad\nline"), "job failed: s1-0: ValueError: bad line"),
    ],
)
def test_failures_a_restart_meets_again_are_deterministic(exc: BaseException, cause: str) -> None:
    assert classify(raised(exc)) == Failure(cause, True)


@pytest.mark.parametrize(
    "exc",
    [
        KafkaUnavailableError("the broker did not answer"),
        RecordLostError("3 records not delivered, e.g. t[0]: Local: Message timed out"),
        ProducerFencedError("fenced"),
        CheckpointError("cannot store snapshot: No space left on device"),
        OSError("Too many open files"),
        RuntimeError("a bug"),
    ],
)
def test_failures_that_may_pass_are_transient(exc: BaseException) -> None:
    failure = classify(raised(exc))
    assert not failure.deterministic
    assert str(exc) in failure.cause


def test_an_unforeseen_error_names_its_type_and_where_it_was_raised() -> None:
    cause = classify(raised(RuntimeError("a bug"))).cause
    assert cause.startswith("RuntimeError: a bug (")
    assert f"{__file__}, line" in cause


def test_records_the_broker_refuses_on_validation_are_deterministic() -> None:
    lost = RecordLostError(
        "transactional commit failed: ProduceRequest for out [0] with 100 message(s) failed: "
        "Broker: Broker failed to validate record (a record of the transaction failed)"
    )
    failure = classify(raised(lost))
    assert failure.deterministic
    assert "compacted topic refuses records without a key" in failure.cause


def test_a_user_functions_sys_exit_names_the_function_not_only_the_code() -> None:
    try:
        user_function_exiting(3)
    except SystemExit as exc:
        failure = classify(exc)
    assert failure.deterministic
    assert "in user_function_exiting) called sys.exit(3)" in failure.cause
    assert __file__ in failure.cause


def test_a_keyboard_interrupt_raised_by_code_is_deterministic() -> None:
    try:
        user_function_interrupted()
    except KeyboardInterrupt as exc:
        failure = classify(exc)
    assert failure.deterministic
    assert "in user_function_interrupted) raised KeyboardInterrupt" in failure.cause


def test_a_cause_is_read_once_for_the_process_that_wrote_it(tmp_path: Path) -> None:
    failure = Failure("state s1 holds a set", True, "/logs/worker-0.log")
    write_cause(tmp_path, failure)
    assert read_cause(tmp_path, os.getpid() + 1) is None
    assert read_cause(tmp_path, os.getpid()) == failure
    assert read_cause(tmp_path, os.getpid()) is None


def test_a_damaged_cause_file_is_no_cause(tmp_path: Path) -> None:
    (tmp_path / f"{os.getpid()}.json").write_text('{"cause": "half')
    assert read_cause(tmp_path, os.getpid()) is None
