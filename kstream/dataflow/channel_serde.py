"""How stream records cross channels (internal topics): safe by default.

A job chooses with ``Job(..., channel_serde=...)``:

==================== ==========================================================
choice               what crosses a channel
==================== ==========================================================
``"msgpack"``        the default: values of built-in types (`kstream.protocol
                     .codec`); reading runs no code
``ChannelSerde(      the same, plus the record types the job declares, each
types=[...])``       with its own `encode`/`decode` to and from built-in values
                     (`kstream.RecordType`); reading runs only those decoders
``"trusted-pickle"`` any picklable value. Reading pickle runs code named by the
                     bytes, so anyone able to write to the job's internal
                     topics can run code in every worker: only for a cluster
                     whose internal topics only the job can write
==================== ==========================================================

Every data record on a channel names its encoding in a format byte
(`kstream.runtime.channels.format`); a reader refuses a format its job does not
trust, unread, instead of unpickling it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kstream.errors import ConfigurationError
from kstream.protocol.codec import RecordType

__all__ = ["CHANNEL_SERDES", "ChannelSerde", "RecordType", "channel_serde"]


@dataclass(frozen=True)
class ChannelSerde:
    """The channel encoding of a job: the safe codec with declared `types`, or trusted pickle."""

    types: tuple[RecordType, ...] = field(default=())
    #: Pickle instead of the codec: any value, but reading runs code (see the module docstring).
    trusted_pickle: bool = False

    def __post_init__(self) -> None:
        types = tuple(self.types)
        if not all(isinstance(t, RecordType) for t in types):
            raise ConfigurationError("ChannelSerde(types=...) takes kstream.RecordType values")
        if len({t.name for t in types}) != len(types):
            raise ConfigurationError("two declared record types have the same tag")
        object.__setattr__(self, "types", types)

    @property
    def name(self) -> str:
        if self.trusted_pickle:
            return "trusted-pickle"
        return "msgpack" if not self.types else f"msgpack+{len(self.types)} declared types"


MSGPACK = ChannelSerde()
TRUSTED_PICKLE = ChannelSerde(trusted_pickle=True)
#: The channel serdes a job can name.
CHANNEL_SERDES = {"msgpack": MSGPACK, "trusted-pickle": TRUSTED_PICKLE}


def channel_serde(choice: str | ChannelSerde | Iterable[RecordType]) -> ChannelSerde:
    """The channel serde `choice` names or is; `ConfigurationError` for an unknown name."""
    if isinstance(choice, ChannelSerde):
        return choice
    if isinstance(choice, str):
        serde = CHANNEL_SERDES.get(choice)
        if serde is None:
            raise ConfigurationError(
                f"unknown channel serde {choice!r}: choose one of {', '.join(CHANNEL_SERDES)}"
                " or pass a kstream.ChannelSerde"
            )
        return serde
    return ChannelSerde(types=tuple(choice))
