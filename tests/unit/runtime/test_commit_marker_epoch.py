"""`kstream.connectors.kafka.marker_epoch`: a commit marker's epoch, or one clear line."""

from __future__ import annotations

import json

import pytest

from kstream.connectors.kafka import marker_epoch
from kstream.errors import ProtocolError


def test_a_marker_names_its_epoch() -> None:
    assert marker_epoch(json.dumps({"epoch": 7, "generation": 2}).encode(), "m[0]@1") == 7
    assert marker_epoch(None, "m[0]@1") == 0  # no value: no epoch committed


@pytest.mark.parametrize(
    "value",
    [b"[" * 100_000, b"\x80", b"[1]", b'{"epoch": "7"}', b'{"epoch": -1}', b'{"epoch": 1e400}'],
)
def test_a_malformed_marker_is_a_protocol_error_naming_where(value: bytes) -> None:
    with pytest.raises(ProtocolError, match=r"commit marker m\[0\]@1 is malformed"):
        marker_epoch(value, "m[0]@1")
