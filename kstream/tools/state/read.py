"""Operator state as a PySpark DataFrame, read in parallel on the executors.

`read_state` locates the state on the driver (`kstream.tools.state.snapshot`:
descriptions only), then runs one Spark task per subtask snapshot of the
operator's stage, i.e. per RocksDB instance and its key-group range. Each task
opens the snapshot's storage itself, checks its files against the manifest
(sizes and SHA-256), fetches the database into a temporary directory (for
``s3://``, downloaded there), opens it read-only with rocksdict and decodes
its rows (`kstream.tools.state.decode.rows`). No state passes through the
driver.

Columns (`schema`): every kind starts with ``key_group INT`` and ``key``; then

========= ==============================================================
value     ``value``
map       ``entry STRING``, ``value``
list      ``index BIGINT``, ``value``
timer     ``domain STRING`` (``event`` / ``processing``), ``timestamp BIGINT``
window    ``start BIGINT``, ``end BIGINT`` (ms), ``value`` (contents), ``emitted BOOLEAN``
========= ==============================================================

``key`` (and ``entry``) is a STRING: a str key itself, any other key its JSON
text. ``value`` is JSON text unless `value_type` names a Spark type (DDL, e.g.
``bigint``, ``array<string>``), which the decoded values must fit.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kstream.dataflow.state.serde import state_serde
from kstream.errors import CheckpointError
from kstream.tools.state.decode import StateKind, rows, to_json_text
from kstream.tools.state.snapshot import StateSource, locate, open_snapshot_storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["JSON_VALUES", "read_state", "schema_ddl", "task_rows"]

#: `value_type` meaning "JSON text in a STRING column".
JSON_VALUES = "json"

_COLUMNS = {
    StateKind.VALUE: ("value",),
    StateKind.MAP: ("entry STRING", "value"),
    StateKind.LIST: ("index BIGINT", "value"),
    StateKind.TIMER: ("domain STRING", "timestamp BIGINT"),
    StateKind.WINDOW: ("`start` BIGINT", "`end` BIGINT", "value", "emitted BOOLEAN"),
}


def schema_ddl(kind: StateKind, value_type: str = JSON_VALUES) -> str:
    """The DataFrame schema of `kind`, as Spark DDL."""
    vt = "STRING" if value_type == JSON_VALUES else value_type
    cols = ["key_group INT", "key STRING"]
    cols += [f"value {vt}" if c == "value" else c for c in _COLUMNS[kind]]
    return ", ".join(cols)


def _text(key: Any) -> str:
    return key if isinstance(key, str) else to_json_text(key)


def _converter(kind: StateKind, value_type: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    value: Callable[[Any], Any] = to_json_text if value_type == JSON_VALUES else (lambda v: v)
    if kind is StateKind.VALUE:
        return lambda r: (r[0], _text(r[1]), value(r[2]))
    if kind is StateKind.MAP:
        return lambda r: (r[0], _text(r[1]), _text(r[2]), value(r[3]))
    if kind is StateKind.LIST:
        return lambda r: (r[0], _text(r[1]), r[2], value(r[3]))
    if kind is StateKind.TIMER:
        return lambda r: (r[0], _text(r[1]), r[2], r[3])
    return lambda r: (r[0], _text(r[1]), r[2], r[3], value(r[4]), r[5])


def task_rows(
    source: StateSource, task: str, kind: StateKind, name: str | None
) -> Iterator[tuple[Any, ...]]:
    """Decoded rows (`kstream.tools.state.decode.rows`) of subtask `task`'s snapshot.

    Runs inside a Spark task. Raises `CheckpointError` when the snapshot is
    damaged (a file missing or of another size or checksum).
    """
    from rocksdict import AccessType, Options, Rdict

    storage = open_snapshot_storage(source)
    problems = storage.validate(source.checkpoint, [task])
    if problems:
        raise CheckpointError(f"snapshot {task} of {source.url} is damaged: {problems[0]}")
    work = Path(tempfile.mkdtemp(prefix=f"kstream-state-{task}-"))
    try:
        db_dir = work / "db"
        if not storage.fetch_db(source.checkpoint, task, db_dir):
            return
        db = Rdict(str(db_dir), Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            loads = state_serde(source.state_serde or "msgpack").loads
            yield from rows(db, source.op, kind, name, loads, source.max_parallelism)
        finally:
            db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_state(
    spark: SparkSession,
    path: str,
    operator: str,
    *,
    kind: StateKind | str = StateKind.VALUE,
    name: str | None = None,
    value_type: str = JSON_VALUES,
    s3_endpoint_url: str = "",
) -> DataFrame:
    """Operator `operator`'s state in the savepoint or checkpoint at `path`.

    `operator`: its uid (``count``), or for a checkpoint its state name
    (``s1.count``); `kind` and `name`: which state (default: the operator's
    default value state; a window operator's windows: ``kind="window"``);
    `value_type`: see the module docstring. One row per key and state entry;
    one Spark task per subtask snapshot. The DataFrame is lazy: the snapshots
    are read when an action runs, and read again by every action (cache it to
    reuse it).

    Raises one line (`CheckpointError`, `ConfigurationError`) for a location that
    is not a kstream snapshot, an unknown operator (the known uids listed), a
    savepoint of a newer format.
    """
    kind = StateKind(kind)
    source = locate(path, operator, s3_endpoint_url=s3_endpoint_url)
    convert = _converter(kind, value_type)

    def read(tasks: Iterable[str]) -> Iterable[tuple[Any, ...]]:
        for task in tasks:
            for row in task_rows(source, task, kind, name):
                yield convert(row)

    schema = schema_ddl(kind, value_type)
    rdd = spark.sparkContext.parallelize(list(source.tasks), len(source.tasks))
    return spark.createDataFrame(rdd.mapPartitions(read), schema)
