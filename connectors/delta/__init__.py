"""Delta Lake sink, exactly once by one Delta commit per checkpoint (delta-rs).

`DeltaSink` (`sink.py`) describes the table and checks it; `DeltaWriter`
(`writer.py`) writes one subtask's epochs as Parquet files at the checkpoint's
barrier and adds them to the table's log in one commit, with application
transactions, when the checkpoint completes; `schema.py` maps declared columns to
Arrow and Delta types and computes file statistics; `plan.py` decides what a
commit adds and whether a writer may still commit. Needs the ``delta`` extra.
"""

from kstream.connectors.delta.sink import DeltaSink
from kstream.connectors.delta.writer import DeltaWriter

__all__ = ["DeltaSink", "DeltaWriter"]
