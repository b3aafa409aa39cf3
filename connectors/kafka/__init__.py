"""Kafka source and sink.

`KafkaSource` (`source.py`) reads a user topic; `KafkaSink` (`sink.py`) writes
one, with `TransactionalWriter` (`transactional.py`, exactly-once) or
`PlainWriter` (`plain.py`, at-least-once or at-most-once). Both writers make
and produce rows in one place (`rows.py`) and share their fixed settings
(`settings.py`). The names below are the package's public ones:
``kstream.connectors.kafka.KafkaSink`` and the rest are imported from here.
"""

from kstream.connectors.kafka.sink import KafkaSink
from kstream.connectors.kafka.source import KafkaSource
from kstream.connectors.kafka.transactional import TransactionalWriter, marker_epoch
from kstream.protocol.names import LINEAGE_HEADERS

__all__ = ["LINEAGE_HEADERS", "KafkaSink", "KafkaSource", "TransactionalWriter", "marker_epoch"]
