"""The reading end of a subtask's input channels: Kafka messages in, `ChannelItem`\\s out.

`ChannelReader.items` decodes each channel record's header once (the wire
format of `kstream.runtime.channels.format`) into a `ChannelItem` for
`kstream.protocol.input.InputProcessor`; the batch inside a data record is
left to the subtask, which decodes only what is delivered.

=====================================  ==============================================
message                                item
=====================================  ==============================================
a consumer error                        none; a fatal one raises `JobFailedError`,
                                        others are logged (`raise_if_fatal`)
a value too short for a header, or a    ``MALFORMED`` (generation and checkpoint 0):
barrier too short for its checkpoint    `malformed` says why
a data, timed or barrier record         its kind, generation and (barrier) checkpoint
a record of another kind                its kind and generation (the processor skips it)
=====================================  ==============================================

A message of a partition that is not one of the reader's channels raises
`KeyError`: the subtask's consumer is assigned its channels only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kstream.errors import DecodeError, ProtocolError
from kstream.protocol.barrier import Channel
from kstream.protocol.input import BARRIER, MALFORMED, ChannelItem
from kstream.runtime.channels.format import (
    HEADER,
    HEADER_SIZE,
    barrier_checkpoint,
    decode_header,
)
from kstream.runtime.kafka import raise_if_fatal

__all__ = ["ChannelReader", "malformed"]

#: A barrier record's size: its header and checkpoint id (`encode_barrier`).
_BARRIER_SIZE = HEADER_SIZE + 8

# A `ChannelItem` made without its generated `__new__`'s Python frame: one is
# made per record, in place of the tuple decoding the header made before.
_new_item = tuple.__new__


class ChannelReader:
    """Turns a batch of one subtask's channel messages into `ChannelItem`\\s.

    `channels` maps each (topic, partition) the subtask reads to its `Channel`.
    """

    def __init__(self, channels: Mapping[tuple[str, int], Channel]) -> None:
        self.channels = channels

    def items(self, msgs: list[Any]) -> list[ChannelItem]:
        """The items of consumed `msgs` (confluent_kafka messages), in order."""
        channels, unpack = self.channels, HEADER.unpack_from
        out: list[ChannelItem] = []
        for m in msgs:
            if m.error() is not None:
                raise_if_fatal(m)
                continue
            ch = channels[m.topic() or "", m.partition() or 0]
            offset = m.offset() or 0
            value = m.value() or b""
            if len(value) < HEADER_SIZE:
                # Not a channel record (nothing of kstream writes one this short).
                out.append(_new_item(ChannelItem, (MALFORMED, ch, offset, 0, 0, value, m)))
                continue
            kind, gen = unpack(value)
            checkpoint = 0
            if kind == BARRIER:
                if len(value) < _BARRIER_SIZE:
                    out.append(_new_item(ChannelItem, (MALFORMED, ch, offset, 0, 0, value, m)))
                    continue
                checkpoint = barrier_checkpoint(value)
            out.append(_new_item(ChannelItem, (kind, ch, offset, gen, checkpoint, value, m)))
        return out


def malformed(value: bytes) -> DecodeError:
    """The record error of a `MALFORMED` item's value: why it is no channel record."""
    try:
        kind, _ = decode_header(value)
        if kind == BARRIER:
            barrier_checkpoint(value)
    except ProtocolError as exc:
        return DecodeError(str(exc))
    return DecodeError(f"channel record of {len(value)} bytes is well formed")
