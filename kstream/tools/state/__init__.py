"""Keyed state of savepoints and checkpoints as PySpark DataFrames.

`read_state` (`kstream.tools.state.read`) returns one row per key and state
entry, read in parallel on Spark's executors, one task per subtask snapshot.
The command line is ``kstream state read`` (`kstream.tools.cli.state`).
"""

from kstream.tools.state.decode import StateKind
from kstream.tools.state.read import read_state, schema_ddl

__all__ = ["StateKind", "read_state", "schema_ddl"]
