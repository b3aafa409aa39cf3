"""The pure half of the listener probe: what a listener's answer says, and the line."""

from __future__ import annotations

import struct

from kstream.infra.listener_probe import (
    CORRELATION_ID,
    ILLEGAL_SASL_STATE,
    Answer,
    Listener,
    describe,
    handshake_request,
    read_answer,
)


def _answer(error: int, correlation_id: int = CORRELATION_ID) -> bytes:
    body = struct.pack(">ih", correlation_id, error) + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def test_the_request_is_a_size_prefixed_sasl_handshake() -> None:
    request = handshake_request()
    (size,) = struct.unpack(">i", request[:4])
    assert size == len(request) - 4
    assert struct.unpack(">hhi", request[4:12]) == (17, 1, CORRELATION_ID)


def test_answers_are_told_apart() -> None:
    assert read_answer(_answer(ILLEGAL_SASL_STATE)) is Answer.NO_SASL
    assert read_answer(_answer(33)) is Answer.SASL  # unsupported mechanism: a SASL listener
    assert read_answer(b"\x15\x03\x03\x00\x02\x02\x50") is Answer.TLS  # a TLS alert
    assert read_answer(_answer(ILLEGAL_SASL_STATE, CORRELATION_ID + 1)) is Answer.UNKNOWN
    assert read_answer(b"") is Answer.UNKNOWN
    assert read_answer(b"HTTP/1.1 400 Bad Request\r\n") is Answer.UNKNOWN


def test_a_listener_speaking_the_clients_protocol_is_no_mismatch() -> None:
    assert describe(Listener("h:1", "SASL_SSL"), "SASL_SSL", "f") is None
    assert describe(Listener("h:1", "TLS"), "SSL", "f") is None


def test_the_line_names_both_protocols_and_the_way_on() -> None:
    line = describe(Listener("h:1", "SASL_SSL"), "PLAINTEXT", None)
    assert line is not None
    assert line.startswith("the listener at h:1 speaks SASL_SSL but the client is configured")
    assert "give --kafka-config FILE" in line
    reverse = describe(Listener("h:1", "PLAINTEXT"), "SASL_SSL", "/x/client.properties")
    assert reverse is not None
    assert "speaks PLAINTEXT" in reverse
    assert "security.protocol in /x/client.properties" in reverse
