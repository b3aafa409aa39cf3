"""Record size limits: the largest Kafka record kstream may write to a topic.

Two limits apply to every record kstream produces:

* the producer's ``message.max.bytes``: librdkafka refuses a larger record
  synchronously in `produce`, and builds no larger batch;
* the topic's ``max.message.bytes``: the broker rejects a larger record batch
  asynchronously (a delivery error; inside a transaction, a failed commit).

kstream sets ``message.max.bytes`` of each of its producers explicitly to the
smallest ``max.message.bytes`` of the topics it writes, less `FRAMING_BYTES`
(`producer_limit`), read from the cluster when the producer is made. Then any
record the producer accepts, and any batch it builds, fits every one of those
topics. Writers compare each record with that limit (`record_bytes`) before
producing it, so a record that cannot fit is a `RecordTooLargeError` of that
one record, handled by the job's error policy, never a Kafka error.

Internal topics are created with ``max.message.bytes`` =
`INTERNAL_TOPIC_MAX_BYTES` explicitly, so a broker whose default is lower does
not shrink them; existing topics keep what they have, and the limits are
always read back rather than assumed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from kstream.errors import ConfigurationError
from kstream.protocol.names import (
    KEY_SHA256_HEADER,
    KEY_TRUNCATED_HEADER,
    SHA256_HEADER,
    TRUNCATED_HEADER,
)

__all__ = [
    "DEFAULT_PRODUCER_BYTES",
    "FRAMING_BYTES",
    "INTERNAL_TOPIC_MAX_BYTES",
    "MAX_MESSAGE_BYTES",
    "DeadLetter",
    "fit_dead_letter",
    "producer_limit",
    "record_bytes",
]

#: The topic setting that bounds a record batch on the broker.
MAX_MESSAGE_BYTES = "max.message.bytes"
#: ``max.message.bytes`` of the internal topics kstream creates: Kafka's own
#: default (1 MiB + 12), stated explicitly so a broker's lower default cannot apply.
INTERNAL_TOPIC_MAX_BYTES = 1_048_588
#: Bytes a record batch adds to its records' keys, values and headers: the v2
#: batch header (61 bytes), each record's length, attributes, deltas and header
#: varints (under 40 bytes, 10 more per header), with ample room to spare.
FRAMING_BYTES = 1024
#: What librdkafka adds to a record's key and value when it compares the record
#: with ``message.max.bytes``: the largest framing of a v2 record (measured with
#: librdkafka 2.16: a 36-byte record is the largest accepted with the limit at 72).
RECORD_OVERHEAD = 36
#: Framing counted per header on top of its name and value (two varints, 1-5
#: bytes each).
HEADER_FRAMING = 10
#: librdkafka's default ``message.max.bytes``: the limit of a producer made
#: without kstream's setting (the default where a limit is not passed in).
DEFAULT_PRODUCER_BYTES = 1_000_000
#: librdkafka's bounds on ``message.max.bytes``.
PRODUCER_MIN_BYTES = 1_000
PRODUCER_MAX_BYTES = 1_000_000_000


Headers = list[tuple[str, bytes]]
DeadLetter = tuple[bytes | None, bytes | None, Headers]


def record_bytes(
    key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, object]] = ()
) -> int:
    """The size librdkafka compares with ``message.max.bytes`` (an upper bound).

    Key, value, headers and the record's framing (`RECORD_OVERHEAD`, and
    `HEADER_FRAMING` per header).
    """
    size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    for name, data in headers:
        size += len(name) + HEADER_FRAMING + (len(data) if isinstance(data, bytes | str) else 0)
    return size


def producer_limit(topic_limits: Iterable[int]) -> int:
    """``message.max.bytes`` for a producer writing topics with these ``max.message.bytes``.

    Raises `ConfigurationError` for a topic too small to take even a control message.
    """
    limit = min([PRODUCER_MAX_BYTES, *(t - FRAMING_BYTES for t in topic_limits)])
    if limit < PRODUCER_MIN_BYTES:
        raise ConfigurationError(
            f"a topic kstream writes has {MAX_MESSAGE_BYTES}="
            f"{limit + FRAMING_BYTES}; kstream needs at least {PRODUCER_MIN_BYTES + FRAMING_BYTES}"
        )
    return limit


def fit_dead_letter(
    key: bytes | None, value: bytes | None, headers: Headers, limit: int
) -> DeadLetter:
    """The dead letter (key, value, headers) cut to at most `limit` bytes, marked if cut.

    A dead letter must fit its topic even when the record it keeps did not fit
    its own. The value keeps its first bytes; `TRUNCATED_HEADER` then holds the
    original size (decimal) and `SHA256_HEADER` the hex SHA-256 of the whole
    value, so a reader knows it is incomplete and can match it with the
    original. A key that alone takes more than a quarter of the room is cut the
    same way (`KEY_TRUNCATED_HEADER`, `KEY_SHA256_HEADER`). The other headers
    are the caller's to bound (they are a few kilobytes of error text).
    """
    if record_bytes(key, value, headers) <= limit:
        return key, value, headers
    headers = list(headers)
    marks = 2 * (len(TRUNCATED_HEADER) + len(SHA256_HEADER) + HEADER_FRAMING + 64)
    room = limit - record_bytes(None, None, headers) - marks
    if room <= 0:
        raise ConfigurationError(f"dead-letter headers alone exceed the limit of {limit} bytes")
    if key is not None and len(key) > room // 4:
        headers += [
            (KEY_TRUNCATED_HEADER, str(len(key)).encode()),
            (KEY_SHA256_HEADER, hashlib.sha256(key).hexdigest().encode()),
        ]
        key = key[: room // 4]
    keep = room - len(key or b"")
    if value is not None and len(value) > keep:
        headers += [
            (TRUNCATED_HEADER, str(len(value)).encode()),
            (SHA256_HEADER, hashlib.sha256(value).hexdigest().encode()),
        ]
        value = value[:keep]
    return key, value, headers
