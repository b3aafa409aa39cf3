"""Records on kstream's own topics that kstream did not write: skipped or refused with one
line, never a crashed reader. Real broker."""

from __future__ import annotations

import json

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.names import control_topic
from kstream.runtime.control import read_history, read_messages
from kstream.testing import produce, unique_name

pytestmark = pytest.mark.broker

#: Bytes no kstream writes: nested past the JSON parser's recursion, not UTF-8, not objects.
CRAFTED = [b"[" * 100_000, b"\x80\xff", b"[1, 2]", b"{", b'"just a string"']


def test_crafted_control_records_are_skipped_and_kstreams_own_are_read(bootstrap: str) -> None:
    job = unique_name("crafted")
    Admin(bootstrap).create_topics({control_topic(job): 1})
    ours = {"type": "no-such-message", "n": 1}
    records = [(None, raw) for raw in CRAFTED] + [(None, json.dumps(ours).encode())]
    produce(bootstrap, control_topic(job), records)
    assert read_history(bootstrap, job) == [ours]
    assert read_messages(bootstrap, job) == []  # an unknown type is skipped too
