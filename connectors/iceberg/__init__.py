"""Apache Iceberg sink, exactly once by one append snapshot per completed checkpoint.

`IcebergSink` (`sink.py`) describes the table; `IcebergWriter` (`writer.py`)
writes one subtask's epochs, each a Parquet file written at the checkpoint's
barrier and appended when it completes; `table.py` loads and checks the table,
writes files and commits them; `marks.py` reads and decides the subtask's marks in
snapshot summaries. Needs the ``iceberg`` extra (pyiceberg with its SQL catalog,
pyarrow).
"""

from kstream.connectors.iceberg.sink import IcebergSink, sql_catalog
from kstream.connectors.iceberg.writer import IcebergWriter

__all__ = ["IcebergSink", "IcebergWriter", "sql_catalog"]
