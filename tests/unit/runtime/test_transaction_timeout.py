"""`kstream.runtime.runner.preflight.transaction_timeout`.

A pre-committed transaction must outlive its checkpoint.
"""

from __future__ import annotations

import pytest

from kstream.errors import TimeoutConfigError
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.runner.preflight import transaction_timeout

CONFIG = CoordinatorConfig(interval=1.0, timeout=60.0)  # needs 2 x 61 = 122 s


def test_default_is_ten_minutes_when_that_is_enough_and_allowed() -> None:
    assert transaction_timeout(CONFIG, None, "3600000") == 600.0


def test_default_grows_with_long_checkpoints() -> None:
    slow = CoordinatorConfig(interval=300.0, timeout=120.0)
    assert transaction_timeout(slow, None, None) == 840.0


def test_default_is_capped_by_the_broker_when_the_cap_is_still_enough() -> None:
    assert transaction_timeout(CONFIG, None, "300000") == 300.0


def test_a_requested_timeout_shorter_than_two_checkpoints_is_refused() -> None:
    with pytest.raises(TimeoutConfigError, match="shorter than 2 x"):
        transaction_timeout(CONFIG, 100.0, None)


def test_a_requested_timeout_above_the_broker_cap_is_refused() -> None:
    with pytest.raises(TimeoutConfigError, match=r"transaction\.max\.timeout\.ms=200000"):
        transaction_timeout(CONFIG, 300.0, "200000")


def test_a_broker_cap_below_what_checkpoints_need_is_refused() -> None:
    with pytest.raises(TimeoutConfigError, match="raise that or shorten"):
        transaction_timeout(CONFIG, None, "100000")


def test_a_valid_request_is_kept() -> None:
    assert transaction_timeout(CONFIG, 200.0, "900000") == 200.0
