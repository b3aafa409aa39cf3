"""kstream: exactly-once stream processing for Python on Apache Kafka.

The front door: what a job author imports (``from kstream import Job, KafkaSource``)
is in `__all__`, pinned by a test; everything else lives in the layers below
(``kstream.dataflow``, ``kstream.protocol``, ``kstream.runtime``, ``kstream.infra``,
``kstream.tools``) and need not be imported to write a job.

The Kafka connectors are loaded on first use: every import of a module of
kstream runs this file first, and the pure layers (``kstream.protocol``,
``kstream.dataflow``) must not load the Kafka client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kstream.dataflow.channel_serde import ChannelSerde, RecordType
from kstream.dataflow.inputs import Source, StartPosition
from kstream.dataflow.job import Job
from kstream.dataflow.operators.windows import (
    Session,
    Sliding,
    TimeWindow,
    Tumbling,
    session,
    sliding,
    tumbling,
)
from kstream.dataflow.outputs import (
    Guarantee,
    Producer,
    Sink,
    SinkContext,
    SinkSnapshot,
    SinkWriter,
)
from kstream.dataflow.serde import DecodeError, Serde
from kstream.dataflow.snapshot_request import request_snapshot
from kstream.dataflow.state.api import (
    AggregatingState,
    KeyedContext,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from kstream.dataflow.state.serde import StateSerde
from kstream.dataflow.stream import (
    ConnectedStreams,
    IterationHead,
    KeyedStream,
    Stream,
    WindowedStream,
)
from kstream.dataflow.types import LATE, Tagged
from kstream.errors import (
    ConfigurationError,
    JobFailedError,
    KStreamError,
    RecordError,
    RecordTooLargeError,
)
from kstream.protocol.watermarks import Lateness, lateness

if TYPE_CHECKING:
    from kstream.connectors.kafka import KafkaSink, KafkaSource

__all__ = [
    "LATE",
    "AggregatingState",
    "ChannelSerde",
    "ConfigurationError",
    "ConnectedStreams",
    "DecodeError",
    "Guarantee",
    "IterationHead",
    "Job",
    "JobFailedError",
    "KStreamError",
    "KafkaSink",
    "KafkaSource",
    "KeyedContext",
    "KeyedStream",
    "Lateness",
    "ListState",
    "MapState",
    "Producer",
    "RecordError",
    "RecordTooLargeError",
    "RecordType",
    "ReducingState",
    "Serde",
    "Session",
    "Sink",
    "SinkContext",
    "SinkSnapshot",
    "SinkWriter",
    "Sliding",
    "Source",
    "StartPosition",
    "StateSerde",
    "Stream",
    "Tagged",
    "TimeWindow",
    "Tumbling",
    "ValueState",
    "WindowedStream",
    "__version__",
    "lateness",
    "request_snapshot",
    "session",
    "sliding",
    "tumbling",
]

if TYPE_CHECKING:
    #: One version, the package's (pyproject.toml): read on first use, as
    #: `importlib.metadata` loads modules (email, socket) the pure layers must not.
    __version__: str

#: Names whose modules import confluent_kafka, with those modules: loaded on
#: first access (see the module docstring).
_ON_FIRST_USE = {
    "KafkaSink": "kstream.connectors.kafka",
    "KafkaSource": "kstream.connectors.kafka",
}

# Hidden from type checkers, which see the imports above: a module-level
# `__getattr__` would make them accept any name imported from kstream.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name == "__version__":
            from importlib.metadata import version as installed

            version = installed("kstream")
            globals()[name] = version
            return version
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module 'kstream' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_ON_FIRST_USE, "__version__"})
