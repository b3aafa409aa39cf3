"""How keyed state values are encoded in RocksDB: pluggable, and by default never running code.

A job chooses one with ``Job(..., state_serde=...)``: a name from `STATE_SERDES`
or a `StateSerde` instance. Snapshots record its `name`; a restore with another
one is refused (`kstream.runtime.checkpoint.restore`), since bytes written by one serde mean
nothing, or something wrong, to another.

================ ==============================================================
name             what it stores
================ ==============================================================
``msgpack``      the default: None, bool, int (any size), float, str, bytes,
                 lists, dicts, and tuples, sets and frozensets kept as such
                 (`kstream.protocol.codec`, shared with channels); loading
                 runs no code
``json``         JSON values only (tuples come back as lists, dict keys must be
                 str); loading runs no code; readable by other tools
``trusted-pickle`` any picklable value; loading runs code named by the stored
                 bytes, so only for state the job's owner trusts (a local state
                 directory nobody else writes). Checkpoints written before
                 serdes were recorded hold pickled state: only this serde
                 restores them
================ ==============================================================
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kstream.errors import ConfigurationError
from kstream.protocol.codec import Codec

__all__ = ["JSON", "MSGPACK", "STATE_SERDES", "TRUSTED_PICKLE", "StateSerde", "state_serde"]


@dataclass(frozen=True, slots=True)
class StateSerde:
    """Turns state values into bytes and back.

    `dumps` raises `TypeError` or `ValueError` for a value it cannot encode;
    ``loads(dumps(v)) == v`` for every value it accepts (with its own type
    rules, e.g. JSON's lists for tuples). `dumps` must be deterministic for
    equal values, since map entry keys are stored under their encoding.
    """

    #: Recorded in snapshots; a restore with another name is refused.
    name: str
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes], Any]


#: The default: kstream's safe codec, canonical (equal values, equal bytes).
#: Its extension types are the ones this serde always stored.
_CODEC = Codec(canonical=True)
_mp_dumps = _CODEC.dumps
_mp_loads = _CODEC.loads


def _json_dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _json_loads(raw: bytes) -> Any:
    return json.loads(raw)


def _pickle_dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


MSGPACK = StateSerde("msgpack", _mp_dumps, _mp_loads)
JSON = StateSerde("json", _json_dumps, _json_loads)
TRUSTED_PICKLE = StateSerde("trusted-pickle", _pickle_dumps, pickle.loads)
#: The serdes a job can name.
STATE_SERDES = {s.name: s for s in (MSGPACK, JSON, TRUSTED_PICKLE)}


def state_serde(choice: str | StateSerde) -> StateSerde:
    """The serde `choice` names (or is); `ConfigurationError` for an unknown name."""
    if isinstance(choice, StateSerde):
        return choice
    serde = STATE_SERDES.get(choice)
    if serde is None:
        raise ConfigurationError(
            f"unknown state serde {choice!r}: choose one of {', '.join(STATE_SERDES)}"
            " or pass a kstream.StateSerde"
        )
    return serde
