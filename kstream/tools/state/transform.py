"""A savepoint's operator state, transformed with DataFrame operations into a new one.

`transform_state` is a migration: read an operator's value state
(`read_state`), apply a function of DataFrames (rename keys, merge or drop
them, change the values' shape), and write the result (`write_state`) as a
new savepoint of the same job, which ``kstream run --from-savepoint`` starts
from as from the original:

- the new savepoint keeps the original's identity, layout (parallelism, key
  groups), state serde and checkpoint id, so it is the same job's;
- every other subtask's snapshot is copied unchanged, on the executors (a
  source's offsets, sink payloads, other operators' state): the job goes on
  reading where the original stopped;
- the operator's stage gets new databases holding the function's rows as the
  operator's value state, each subtask's snapshot keeping its offsets, event
  time and sink payloads. Other state of that stage (named states, timers,
  windows) is not carried: a stage holding any other operator's state is
  refused, and the operator's own named states and timers are dropped.

The same checks as a bootstrap (null and duplicated keys with their counts, the
first value the serde cannot encode, a target that holds anything), and
``savepoint.json`` is written last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kstream.dataflow.state.serde import state_serde
from kstream.errors import ConfigurationError
from kstream.runtime.checkpoint.savepoint import SavepointInfo, open_savepoint
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage
from kstream.tools.state.bootstrap import (
    BootstrapResult,
    Target,
    Written,
    copy_subtask,
    refuse_existing,
    write_state,
)
from kstream.tools.state.read import JSON_VALUES, read_state
from kstream.tools.state.snapshot import locate, normal_url, stage_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["transform_state"]


def transform_state(
    spark: SparkSession,
    source: str,
    operator: str,
    fn: Callable[[DataFrame], DataFrame],
    out: str,
    *,
    value_type: str = JSON_VALUES,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write savepoint `out`: savepoint `source` with operator `operator`'s value
    state replaced by ``fn(read_state(spark, source, operator, value_type=value_type))``.

    `fn` gets the columns ``key_group``, ``key``, ``value`` and returns a DataFrame
    with columns ``key`` and ``value`` (others are ignored; key groups are
    computed again from the keys). A key is written as the column holds it: a
    STRING is a str key (cast the column for keys of another type). With
    `value_type` ``json`` (the default) the ``value`` column is JSON text, decoded
    before it is written (JSON arrays become lists); with a Spark type (e.g.
    ``bigint``) the column's values are written as they are.

    Raises one line: `CheckpointError` for a source that is not a savepoint (a
    checkpoint: take a savepoint), is damaged or of a newer format, or a target
    that holds anything; `ConfigurationError` for an unknown operator, a stage
    holding another operator's state, a result without ``key`` and ``value``
    columns, a key column with nulls or duplicates (their counts);
    `StateValueError` for the first value the serde cannot encode.
    """
    located = locate(source, operator, s3_endpoint_url=s3_endpoint_url)
    if not located.savepoint:
        raise ConfigurationError(
            f"{source} is a checkpoint: transform a savepoint (kstream savepoint --job-name …)"
        )
    _, info = open_savepoint(located.url, s3_endpoint_url=s3_endpoint_url, validate=False)
    stage = stage_of(located.op)
    shared = [s for s in info.states if s != located.op and stage_of(s) == stage]
    if shared:
        raise ConfigurationError(
            f"stage {stage} of savepoint {located.url} also holds the state of "
            f"{', '.join(shared)}: transforming {located.op} alone would drop it"
        )
    url = normal_url(out)
    refuse_existing(url, s3_endpoint_url)
    result = fn(read_state(spark, source, operator, value_type=value_type,
                           s3_endpoint_url=s3_endpoint_url))  # fmt: skip
    missing = [c for c in ("key", "value") if c not in result.columns]
    if missing:
        raise ConfigurationError(
            f"the transformed state has no {' and no '.join(missing)} column "
            f"(columns: {', '.join(result.columns)})"
        )
    target = Target(
        url, s3_endpoint_url, located.op, stage, info.parallelism[stage], info.max_parallelism,
        state_serde(info.state_serde or "msgpack"), info.identity.fingerprint,
        checkpoint=info.checkpoint, base=located,
        states=(Written(json_values=value_type == JSON_VALUES),),
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
    return write_state(
        [result.select("key", "value")], target, new_info, copy_others,
        f"state serde of savepoint {located.url}",
    )  # fmt: skip
