"""Record size arithmetic: producer limits from topic limits, dead letters cut to fit."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.protocol.limits import (
    FRAMING_BYTES,
    PRODUCER_MAX_BYTES,
    RECORD_OVERHEAD,
    fit_dead_letter,
    producer_limit,
    record_bytes,
)
from kstream.protocol.names import (
    KEY_SHA256_HEADER,
    KEY_TRUNCATED_HEADER,
    SHA256_HEADER,
    TRUNCATED_HEADER,
)

ERROR_HEADERS = [("kstream.error", b"RecordTooLargeError: too large"), ("kstream.task", b"s0-1")]


def test_the_producer_limit_is_the_smallest_topic_limit_less_framing() -> None:
    assert producer_limit([1_048_588, 20_000]) == 20_000 - FRAMING_BYTES
    assert producer_limit([]) == PRODUCER_MAX_BYTES


def test_a_topic_too_small_for_any_record_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"max\.message\.bytes=1500"):
        producer_limit([1_500])


def test_record_bytes_counts_key_value_headers_and_framing() -> None:
    assert record_bytes(None, None) == RECORD_OVERHEAD
    assert record_bytes(b"k", b"vv", [("h", b"xyz")]) == RECORD_OVERHEAD + 3 + 1 + 3 + 10


def test_a_dead_letter_that_fits_is_unchanged() -> None:
    key, value = b"k", b"v" * 100
    assert fit_dead_letter(key, value, ERROR_HEADERS, 10_000) == (key, value, ERROR_HEADERS)


@given(
    key=st.one_of(st.none(), st.binary(max_size=5_000)),
    value=st.binary(max_size=20_000),
    limit=st.integers(min_value=2_000, max_value=12_000),
)
def test_a_dead_letter_is_cut_to_fit_and_marked(
    key: bytes | None, value: bytes, limit: int
) -> None:
    k, v, headers = fit_dead_letter(key, value, ERROR_HEADERS, limit)
    assert record_bytes(k, v, headers) <= limit
    marks = dict(headers)
    assert headers[: len(ERROR_HEADERS)] == ERROR_HEADERS
    assert value.startswith(v)
    if v != value:
        assert marks[TRUNCATED_HEADER] == str(len(value)).encode()
        assert marks[SHA256_HEADER] == hashlib.sha256(value).hexdigest().encode()
    else:
        assert TRUNCATED_HEADER not in marks
    if key is not None and k != key:
        assert key.startswith(k or b"")
        assert marks[KEY_TRUNCATED_HEADER] == str(len(key)).encode()
        assert marks[KEY_SHA256_HEADER] == hashlib.sha256(key).hexdigest().encode()
