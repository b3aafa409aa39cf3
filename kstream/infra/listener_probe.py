"""Which security protocol a Kafka listener speaks, found on a raw socket.

When a client configured for one protocol meets a listener of another
(plaintext against SASL_SSL, or the reverse), librdkafka reports only a
transport failure after its timeout. `mismatch` finds the cause: it sends a
Kafka SaslHandshake request in the clear and, failing a Kafka answer, opens
TLS and sends it again. Kafka answers that request on every listener, before
any authentication: a listener without SASL with ILLEGAL_SASL_STATE, a SASL
listener with the mechanisms it enables. A TLS listener answers bytes in the
clear with a TLS alert record.

The probe runs only when the client got no metadata within a second (a
healthy cluster answers in milliseconds), and it accuses a mismatch only on a
Kafka (or TLS) answer naming another protocol, never on silence, so a slow
cluster is waited for as before. It sends no credentials and reads nothing
but the answer to its one request: the TLS connection does not verify the
broker's certificate, which is sound because nothing secret crosses it.

The byte-level parts (`handshake_request`, `read_answer`, `is_tls_record`,
`describe`) are pure; `probe` and `mismatch` do the I/O.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Answer",
    "Listener",
    "describe",
    "handshake_request",
    "is_tls_record",
    "mismatch",
    "probe",
    "read_answer",
]

#: Kafka's SaslHandshake request; version 1 is what every broker since 1.0 accepts.
SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSION = 17, 1
#: The error a listener without SASL answers a SaslHandshake with.
ILLEGAL_SASL_STATE = 34
#: A mechanism no broker enables: a SASL listener answers with the ones it does.
PROBE_MECHANISM = b"kstream-probe"
CORRELATION_ID = 0x6B73  # any number: the answer must echo it
#: A live listener answers within milliseconds; this only bounds a silent one.
PROBE_TIMEOUT_S = 3.0
#: A SaslHandshake answer is a few dozen bytes; more means it is not one.
MAX_ANSWER_BYTES = 1 << 16


class Answer(Enum):
    """What a listener made of a SaslHandshake request."""

    NO_SASL = "no SASL"  # a Kafka answer: ILLEGAL_SASL_STATE
    SASL = "SASL"  # a Kafka answer: the mechanisms it enables
    TLS = "TLS"  # a TLS record: the listener wants a TLS handshake first
    UNKNOWN = "unknown"  # anything else, including silence and a closed connection


@dataclass(frozen=True, slots=True)
class Listener:
    """The protocol one listener speaks: `protocol` is a librdkafka security.protocol
    in upper case, or ``TLS`` when TLS was found but not what runs inside it."""

    address: str
    protocol: str


def handshake_request(correlation_id: int = CORRELATION_ID) -> bytes:
    """A size-prefixed SaslHandshake v1 request asking for `PROBE_MECHANISM`."""
    client = b"kstream-probe"
    header = struct.pack(
        ">hhih", SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSION, correlation_id, len(client)
    )
    body = struct.pack(">h", len(PROBE_MECHANISM)) + PROBE_MECHANISM
    message = header + client + body
    return struct.pack(">i", len(message)) + message


def is_tls_record(data: bytes) -> bool:
    """Whether `data` starts like a TLS record (an alert or a handshake, version 3.x)."""
    return len(data) >= 3 and data[0] in (0x15, 0x16) and data[1] == 0x03


def read_answer(data: bytes, correlation_id: int = CORRELATION_ID) -> Answer:
    """What the bytes a listener sent back to `handshake_request` say."""
    if is_tls_record(data):
        return Answer.TLS
    if len(data) < 10:
        return Answer.UNKNOWN
    size, echoed, error = struct.unpack(">iih", data[:10])
    if echoed != correlation_id or not 6 <= size <= MAX_ANSWER_BYTES:
        return Answer.UNKNOWN
    return Answer.NO_SASL if error == ILLEGAL_SASL_STATE else Answer.SASL


def _exchange(sock: socket.socket) -> bytes:
    """Send the request on `sock` and return what came back (empty if nothing did)."""
    sock.sendall(handshake_request())
    data = b""
    try:
        # A Kafka answer's first 10 bytes decide; a TLS alert is shorter, and its
        # sender may keep the connection open.
        while len(data) < 10 and not is_tls_record(data):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass  # a reset or a timeout: judged by what arrived before it
    return data


def probe(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """The security protocol the listener at `host`:`port` speaks, or None if unknown.

    ``PLAINTEXT``, ``SASL_PLAINTEXT``, ``SSL``, ``SASL_SSL``, or ``TLS`` when the
    listener speaks TLS but the handshake failed (it wants a client certificate).
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            clear = read_answer(_exchange(sock))
    except OSError:
        return None
    if clear is Answer.NO_SASL:
        return "PLAINTEXT"
    if clear is Answer.SASL:
        return "SASL_PLAINTEXT"
    # A TLS alert, or nothing: try TLS (some TLS servers close without an alert).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # nothing secret is sent: see the module's docstring
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host) as sock,
        ):
            inside = read_answer(_exchange(sock))
    except ssl.SSLError as exc:
        # An alert from the server (e.g. it wants a client certificate) is TLS talk.
        return "TLS" if "ALERT" in str(exc.reason or "").upper() else None
    except OSError:
        return "TLS" if clear is Answer.TLS else None
    if inside is Answer.NO_SASL:
        return "SSL"
    if inside is Answer.SASL:
        return "SASL_SSL"
    return "TLS" if clear is Answer.TLS else None


def _speaks_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL", "TLS")


def _agrees(spoken: str, configured: str) -> bool:
    return spoken == configured or (spoken == "TLS" and _speaks_tls(configured))


def describe(listener: Listener, configured: str, settings_file: str | None) -> str | None:
    """The one line saying `listener` speaks another protocol than `configured`, or None."""
    if _agrees(listener.protocol, configured):
        return None
    spoken = "SSL or SASL_SSL" if listener.protocol == "TLS" else listener.protocol
    where = f"the listener at {listener.address} speaks {spoken}"
    if settings_file is None:
        return (
            f"{where} but the client is configured for {configured} (no --kafka-config "
            f"given); give --kafka-config FILE (or KSTREAM_KAFKA_CONFIG) with "
            f"security.protocol={spoken.split()[0]} and the cluster's credentials"
        )
    return (
        f"{where} but the client is configured for {configured} (security.protocol in "
        f"{settings_file}); give the --kafka-config file of this cluster, or the address of "
        f"its {configured} listener"
    )


def mismatch(
    bootstrap: str, configured: str, settings_file: str | None, timeout: float = PROBE_TIMEOUT_S
) -> str | None:
    """The line saying the listeners of `bootstrap` speak another protocol than
    `configured` (a librdkafka security.protocol), or None.

    None as well when any listener speaks `configured`, or none could be probed:
    then the cause of the failure lies elsewhere.
    """
    configured = configured.upper()
    found: str | None = None
    for address in bootstrap.split(","):
        address = address.strip()
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            continue
        # A listener name prefix ("SASL_SSL://host") is allowed by librdkafka.
        host = host.rpartition("//")[2].strip("[]")
        spoken = probe(host, int(port), timeout)
        if spoken is None:
            continue
        line = describe(Listener(address.rpartition("//")[2], spoken), configured, settings_file)
        if line is None:
            return None
        found = found or line
    return found
