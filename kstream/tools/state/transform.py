"""A savepoint's operator state, transformed with DataFrame operations into a new one.

A transform is a migration: read an operator's states (`read_state`), change
them with DataFrame operations (rename keys, merge or drop them, drop map
entries, change values' shape), and write the result as a new savepoint of
the same job, which ``kstream run --from-savepoint`` starts from as from the
original: the job goes on reading where the original stopped.

- `transform_state`: one state (the default value state, or a named value,
  map or list state) replaced by a function of its DataFrame;
- `transform_states`: several states of one operator, each given as the
  `StateRows` of `bootstrap_states` (usually built from `read_state` of the
  same savepoint), in one new savepoint.

What the new savepoint holds:

- the original's identity, layout (parallelism, key groups), state serde and
  checkpoint id, so it is the same job's;
- every other stage's subtask snapshots copied unchanged, on the executors (a
  source's offsets, sink payloads, other operators' state);
- in the operator's stage, each subtask's database is the original's with the
  given states replaced, wholly, by the given rows (no rows: the state is
  emptied). Everything else in it is kept as it was: the operator's states not
  given (named states, timers, a window operator's windows) and the state of
  other operators of the stage. Each subtask keeps its offsets, event time and
  sink payloads.

The same refusals as a bootstrap (`check_states`, `write_state`: a window or
timer kind, a reserved name, a state given twice, null or duplicated keys,
entries or indexes with their counts, list indexes not 0..n-1, the first value
the serde cannot encode, a target that holds anything); ``savepoint.json`` is
written last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kstream.dataflow.state.serde import state_serde
from kstream.errors import ConfigurationError
from kstream.runtime.checkpoint.savepoint import SavepointInfo, open_savepoint
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage
from kstream.tools.state.bootstrap import (
    BootstrapResult,
    StateRows,
    Target,
    check_kind,
    check_states,
    copy_subtask,
    refuse_existing,
    write_state,
)
from kstream.tools.state.decode import StateKind
from kstream.tools.state.read import JSON_VALUES, read_state
from kstream.tools.state.snapshot import locate, normal_url, stage_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["transform_state", "transform_states"]


def transform_state(
    spark: SparkSession,
    source: str,
    operator: str,
    fn: Callable[[DataFrame], DataFrame],
    out: str,
    *,
    kind: StateKind | str = StateKind.VALUE,
    name: str | None = None,
    value_type: str = JSON_VALUES,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write savepoint `out`: savepoint `source` with one state of operator
    `operator` replaced by ``fn(read_state(spark, source, operator, kind=kind,
    name=name, value_type=value_type))``; its other states are kept.

    `kind` value and `name` None (the default): the operator's default value
    state; a `name`: ``ctx.value(name)``; `kind` map or list (a `name` needed):
    ``ctx.map(name)``, ``ctx.list(name)``. `fn` gets `read_state`'s columns and
    returns a DataFrame with columns ``key`` and ``value``, and ``entry`` for a
    map, ``index`` for a list (others are ignored; key groups are computed again
    from the keys). A key or entry is written as the column holds it: a STRING
    is a str (cast the column for another type). With `value_type` ``json``
    (the default) the ``value`` column is JSON text, decoded before it is
    written (JSON arrays become lists); with a Spark type (e.g. ``bigint``) the
    column's values are written as they are.

    Raises one line: `CheckpointError` for a source that is not a savepoint,
    is damaged or of a newer format, or a target that holds anything;
    `ConfigurationError` for an unknown operator, a kind that is not written
    (window, timer), a result without the kind's columns, and the row
    refusals of `transform_states`; `StateValueError` for the first value the
    serde cannot encode.
    """
    k = check_kind(kind, name, "transform")
    state = read_state(spark, source, operator, kind=k, name=name, value_type=value_type,
                       s3_endpoint_url=s3_endpoint_url)  # fmt: skip
    result = fn(state)
    rows = StateRows(result, k, name, json_values=value_type == JSON_VALUES)
    missing = [c for c in rows.columns() if c not in result.columns]
    if missing:
        raise ConfigurationError(
            f"the transformed state has no {' and no '.join(missing)} column "
            f"(columns: {', '.join(result.columns)})"
        )
    return transform_states(spark, source, operator, [rows], out, s3_endpoint_url=s3_endpoint_url)


def transform_states(
    spark: SparkSession,
    source: str,
    operator: str,
    states: Sequence[StateRows],
    out: str,
    *,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write savepoint `out`: savepoint `source` with the states of operator
    `operator` that `states` name replaced by their rows (`StateRows`: columns,
    kinds and names as for `bootstrap_states`); every state not given is kept
    as it was, and the job resumes where the original stopped.

    A state's rows replace it wholly: a key, map entry or list element not in
    them is gone (no rows: the state emptied). States not given are kept for
    every key, also for keys the given states no longer have: a transform that
    renames or drops keys gives every state of those keys.

    Raises one line, before anything is written: `CheckpointError` for a source
    that is not a savepoint (a checkpoint: take a savepoint), is damaged or of
    a newer format, a target that holds anything; `ConfigurationError` for an
    unknown operator, no state, a window or timer kind, a map or list without a
    name, a reserved name (``timers``, ``windows``), a state given twice, a
    missing column, rows with null keys, entries or indexes, duplicated keys,
    (key, entry) or (key, index) pairs, or a key whose list indexes are not
    0..n-1 (their counts); `StateValueError` for the first key, entry or value
    the savepoint's state serde cannot encode.
    """
    from pyspark import StorageLevel

    located = locate(source, operator, s3_endpoint_url=s3_endpoint_url)
    if not located.savepoint:
        raise ConfigurationError(
            f"{source} is a checkpoint: transform a savepoint (kstream savepoint --job-name …)"
        )
    check_states(states, located.op, "transform")
    _, info = open_savepoint(located.url, s3_endpoint_url=s3_endpoint_url, validate=False)
    stage = stage_of(located.op)
    url = normal_url(out)
    refuse_existing(url, s3_endpoint_url)
    target = Target(
        url, s3_endpoint_url, located.op, stage, info.parallelism[stage], info.max_parallelism,
        state_serde(info.state_serde or "msgpack"), info.identity.fingerprint,
        checkpoint=info.checkpoint, base=located, states=tuple(s.written() for s in states),
    )  # fmt: skip
    others = [t for t in info.tasks if not t.startswith(f"s{stage}-")]

    def copy_others(_: ManagedCheckpointStorage) -> None:
        if others:
            tasks = spark.sparkContext.parallelize(others, len(others))
            tasks.mapPartitions(
                lambda ts: (done for t in ts for done in copy_subtask(located, target, t))
            ).collect()

    # A stamp shown to people (when the savepoint was made), never compared.
    new_info: SavepointInfo = replace(info, time=time.time())
    # The rows are usually read from the savepoint (`read_state` is lazy), and the
    # checks and the write are several Spark jobs: kept (spilled to disk when
    # large) rather than read and decoded again by each.
    frames = [s.df.select(*s.columns()).persist(StorageLevel.MEMORY_AND_DISK) for s in states]
    try:
        return write_state(frames, target, new_info, copy_others,
                           f"state serde of savepoint {located.url}")  # fmt: skip
    finally:
        for f in frames:
            f.unpersist()
