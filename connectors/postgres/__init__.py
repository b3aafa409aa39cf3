"""PostgreSQL sink, exactly once by PostgreSQL's own two-phase commit.

`PostgresSink` (`sink.py`) describes the table; `PostgresWriter` (`writer.py`)
writes one subtask's epochs, each a transaction prepared at the checkpoint's
barrier and committed when it completes; `schema.py` checks the server and the
table and sends batches; `gids.py` names the prepared transactions and decides
what a recovery commits or rolls back. Needs the ``postgres`` extra (psycopg 3).
"""

from kstream.connectors.postgres.sink import PostgresSink
from kstream.connectors.postgres.writer import PostgresWriter

__all__ = ["PostgresSink", "PostgresWriter"]
