"""kstream: exactly-once stream processing for Python on Apache Kafka.

The front door: what a job author imports (``from kstream import Job, KafkaSource``)
is in `__all__`, pinned by a test; everything else lives in the layers below
(``kstream.dataflow``, ``kstream.protocol``, ``kstream.runtime``, ``kstream.infra``,
``kstream.tools``) and need not be imported to write a job.

The connectors and the sink guarantees are loaded on first use: every import of
a module of kstream runs this file first, and the pure layers
(``kstream.protocol``, ``kstream.dataflow``) must not load the Kafka client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kstream.dataflow.channel_serde import ChannelSerde, RecordType
from kstream.dataflow.job import (
    ConnectedStreams,
    Job,
    KeyedStream,
    Sink,
    Source,
    Stream,
    Tagged,
    ValueState,
)
from kstream.dataflow.serde import DecodeError, Serde
from kstream.dataflow.snapshot_request import request_snapshot
from kstream.dataflow.state import (
    AggregatingState,
    KeyedContext,
    ListState,
    MapState,
    ReducingState,
)
from kstream.dataflow.state_serde import StateSerde
from kstream.dataflow.windows import session, sliding, tumbling
from kstream.errors import (
    ConfigurationError,
    JobFailedError,
    KStreamError,
    RecordError,
    RecordTooLargeError,
)

if TYPE_CHECKING:
    from kstream.connectors.kafka import KafkaSink, KafkaSource
    from kstream.runtime.sink import GUARANTEES, Guarantee

__all__ = [
    "GUARANTEES",
    "AggregatingState",
    "ChannelSerde",
    "ConfigurationError",
    "ConnectedStreams",
    "DecodeError",
    "Guarantee",
    "Job",
    "JobFailedError",
    "KStreamError",
    "KafkaSink",
    "KafkaSource",
    "KeyedContext",
    "KeyedStream",
    "ListState",
    "MapState",
    "RecordError",
    "RecordTooLargeError",
    "RecordType",
    "ReducingState",
    "Serde",
    "Sink",
    "Source",
    "StateSerde",
    "Stream",
    "Tagged",
    "ValueState",
    "__version__",
    "request_snapshot",
    "session",
    "sliding",
    "tumbling",
]

__version__ = "0.1.0"

#: Names whose modules import confluent_kafka, with those modules: loaded on
#: first access (see the module docstring).
_ON_FIRST_USE = {
    "KafkaSink": "kstream.connectors.kafka",
    "KafkaSource": "kstream.connectors.kafka",
    "GUARANTEES": "kstream.runtime.sink",
    "Guarantee": "kstream.runtime.sink",
}

# Hidden from type checkers, which see the imports above: a module-level
# `__getattr__` would make them accept any name imported from kstream.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module 'kstream' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_ON_FIRST_USE})
