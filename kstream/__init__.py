"""kstream: exactly-once stream processing for Python on Apache Kafka."""

from kstream.errors import KStreamError

__all__ = ["KStreamError", "__version__"]

__version__ = "0.1.0"
