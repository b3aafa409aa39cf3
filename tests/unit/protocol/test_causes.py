"""Bounded label values for abort reasons and recovery causes."""

from __future__ import annotations

import pytest

from kstream.protocol.causes import ABORT_REASONS, RECOVERY_CAUSES, abort_reason, recovery_cause


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("not complete within 60s", "timeout"),
        ("not complete within 60s; w0 storing s1-0's snapshot of 12 MB", "timeout"),
        ("declined by s1-0: snapshot not stored: disk full", "declined"),
        ("subsumed by checkpoint 20500", "subsumed"),
        ("overtaken by 20501, started by s0-1", "overtaken"),
        ("started by s0-0 while 2 checkpoints were in flight (at most 2)", "too_many_in_flight"),
        ("older than completed checkpoint 41000", "stale"),
        ("coordinator restarted", "coordinator_restarted"),
        ("job stopped", "stopped"),
        ("something new", "other"),
        ("", "other"),
    ],
)
def test_abort_reasons(reason: str, label: str) -> None:
    assert abort_reason(reason) == label
    assert label in ABORT_REASONS


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("worker w1 lost: killed by SIGKILL", "worker_lost"),
        ("worker w0 silent for more than 10s", "worker_silent"),
        (
            "worker w0 silent for more than 10s; checkpoint 5 not complete within 3s",
            "worker_silent",
        ),
        ("worker w2 restarted: process ab12 waits to join (was cd34)", "worker_restarted"),
        ("worker w2 claimed by a second process ab12 (was cd34)", "second_process"),
        ("checkpoint 30750 is damaged: manifest missing", "checkpoint_damaged"),
        (
            "checkpoint 7 not complete within 3s: timeout 3 in a row, at most 2 tolerated; "
            "never acked by s1-0 (on w1)",
            "checkpoint_timeouts",
        ),
        ("job started", "other"),
    ],
)
def test_recovery_causes(reason: str, label: str) -> None:
    assert recovery_cause(reason) == label
    assert label in RECOVERY_CAUSES


def test_label_sets_are_small_and_distinct() -> None:
    for values in (ABORT_REASONS, RECOVERY_CAUSES):
        assert len(set(values)) == len(values) <= 12
        assert values[-1] == "other"
