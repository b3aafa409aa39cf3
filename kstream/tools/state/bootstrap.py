"""A savepoint built from a DataFrame: keyed state prepared from history.

`bootstrap_state` writes a savepoint that ``kstream run --from-savepoint``
takes as it takes any other: the layout and manifests of
`kstream.runtime.checkpoint.savepoint`, the identity of the job it will be
started with (planned from its spec and parameters at `workers`), and the
operator's state in key format 3.

Order of work, so that nothing half-written ever looks complete:

1. on the driver, the job is planned and the operator resolved (one line if unknown);
2. Spark jobs check the key column (nulls, duplicates: refused with their
   counts) and encode every value with the job's state serde (the first value it
   cannot encode is refused, with its key);
3. the rows are partitioned by owner subtask (``key group * P // K``) and
   each Spark task builds its subtask's RocksDB database with the runtime's own
   `StateStore` and stores it, with its manifest, in the savepoint;
4. the driver stores the other subtasks' snapshots (no state) and, last,
   ``savepoint.json``. A failure before that removes a local target again;
   an ``s3://`` target without ``savepoint.json`` is incomplete and refused by
   every reader.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kstream.dataflow.identity import identity_of, state_names
from kstream.dataflow.plan import plan
from kstream.dataflow.state.serde import StateSerde
from kstream.errors import CheckpointError, ConfigurationError, StateValueError
from kstream.protocol.identity import JobIdentity
from kstream.protocol.key_groups import group_of, owner
from kstream.runtime.checkpoint.savepoint import (
    DESCRIPTION,
    FORMAT_VERSION,
    SavepointInfo,
    savepoint_storage,
)
from kstream.runtime.checkpoint.storage import ManagedCheckpointStorage, SnapshotMeta
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_bytes
from kstream.tools.spec import load_job
from kstream.tools.state.snapshot import (
    StateSource,
    normal_url,
    open_snapshot_storage,
    resolve_operator,
    stage_of,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "BOOTSTRAP_CHECKPOINT",
    "BootstrapResult",
    "Target",
    "bootstrap_state",
    "copy_subtask",
    "refuse_existing",
    "write_state",
]

#: The checkpoint id of a bootstrapped savepoint (an import renumbers it anyway).
BOOTSTRAP_CHECKPOINT = 1
#: Keys written to the cache between flushes into RocksDB.
FLUSH_EVERY = 100_000


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """The savepoint written: its URL, the state name, and keys per subtask."""

    url: str
    op: str
    keys: dict[str, int]


@dataclass(frozen=True, slots=True)
class Target:
    """What every writing task needs (pickled to the executors).

    `base`: a savepoint whose snapshots of the operator's stage give the written
    ones their offsets, watermarks and sink payloads (a transform); None: a new
    job's (no offsets). `json_values`: the value column holds JSON text, decoded
    before it is encoded with `serde`.
    """

    url: str
    s3_endpoint_url: str
    op: str
    stage: int
    parallelism: int
    max_parallelism: int
    serde: StateSerde
    fingerprint: str
    checkpoint: int = BOOTSTRAP_CHECKPOINT
    base: StateSource | None = None
    json_values: bool = False


def _plain(value: Any) -> Any:
    """A Spark value as the job would hold it: Rows as dicts, recursively."""
    as_dict = getattr(value, "asDict", None)
    return as_dict(recursive=True) if as_dict is not None else value


def _value(t: Target, value: Any) -> Any:
    """A value of the DataFrame as the job holds it."""
    if t.json_values and isinstance(value, str):
        return json.loads(value)
    return _plain(value)


def _meta(t: Target, task: str, parallelism: int, size: int, has_state: bool) -> SnapshotMeta:
    return SnapshotMeta(
        checkpoint=t.checkpoint, generation=0, task=task, has_state=has_state,
        size=size, identity=t.fingerprint, state_serde=t.serde.name, key_format=KEY_FORMAT,
        max_parallelism=t.max_parallelism, parallelism=parallelism,
    )  # fmt: skip


def _write_subtask(
    t: Target, index: int, rows: Iterable[tuple[int, Any]]
) -> Iterator[tuple[str, int]]:
    """Build subtask `index`'s database from its (key group, (key, value)) rows and
    store it in the savepoint; yield (task, keys)."""
    task = f"s{t.stage}-{index}"
    work = Path(tempfile.mkdtemp(prefix=f"kstream-bootstrap-{task}-"))
    try:
        store = StateStore(work / "db", t.serde, t.max_parallelism)
        ctx = store.context(t.op)
        n = 0
        for g, (key, value) in rows:
            ctx.key = g.to_bytes(2, "big") + key_bytes(key)
            ctx.set(_value(t, value))
            n += 1
            if n % FLUSH_EVERY == 0:
                store.flush()
        size = store.checkpoint(work / "staged")
        store.close()
        meta, payloads = _meta(t, task, t.parallelism, size, True), {}
        if t.base is not None:
            base = open_snapshot_storage(t.base)
            _check_intact(base, t.base, task)
            kept = base.load(t.base.checkpoint, task)
            meta = replace(kept, has_state=True, size=size, state_serde=t.serde.name,
                           key_format=KEY_FORMAT)  # fmt: skip
            payloads = base.load_payloads(t.base.checkpoint, task)
        storage = savepoint_storage(t.url, s3_endpoint_url=t.s3_endpoint_url, create=True)
        storage.store(meta, work / "staged", payloads)
        yield task, n
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_intact(storage: ManagedCheckpointStorage, source: StateSource, task: str) -> None:
    problems = storage.validate(source.checkpoint, [task])
    if problems:
        raise CheckpointError(f"snapshot {task} of {source.url} is damaged: {problems[0]}")


def copy_subtask(source: StateSource, t: Target, task: str) -> Iterator[str]:
    """Copy subtask `task`'s snapshot (database, offsets, payloads) from the savepoint
    `source` into the savepoint `t.url` unchanged; runs in a Spark task."""
    base = open_snapshot_storage(source)
    _check_intact(base, source, task)
    work = Path(tempfile.mkdtemp(prefix=f"kstream-copy-{task}-"))
    try:
        meta = base.load(source.checkpoint, task)
        has_db = base.fetch_db(source.checkpoint, task, work / "db")
        payloads = base.load_payloads(source.checkpoint, task)
        storage = savepoint_storage(t.url, s3_endpoint_url=t.s3_endpoint_url, create=True)
        storage.store(meta, work / "db" if has_db else None, payloads)
        yield task
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unencodable(t: Target, rows: Iterable[Any]) -> Iterator[str]:
    """One line for the first row of `rows` whose value `t.serde` cannot encode."""
    for key, value in rows:
        try:
            t.serde.dumps(_value(t, value))
        except (TypeError, ValueError, OverflowError) as exc:
            yield f"key {key!r}: a {type(value).__name__} value ({exc})"
            return


def _check_keys(df: DataFrame, key: str) -> None:
    from pyspark.sql import functions as sf

    nulls = df.filter(sf.col(key).isNull()).count()
    dup = (
        df.filter(sf.col(key).isNotNull())
        .groupBy(key)
        .count()
        .filter(sf.col("count") > 1)
        .agg(sf.count("*").alias("keys"), sf.sum("count").alias("rows"))
        .collect()[0]
    )
    keys, rows = dup["keys"], dup["rows"] or 0
    if nulls or keys:
        raise ConfigurationError(
            f"key column {key!r} has {nulls} null keys and {keys} duplicated keys "
            f"({rows} rows): a state has one value per key; aggregate or filter first"
        )


def refuse_existing(url: str, endpoint: str) -> None:
    """Refuse a target that holds anything; creates nothing."""
    if url.startswith("file://"):
        root = Path(urlsplit(url).path)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise CheckpointError(f"{url} is not empty: name a new location for the savepoint")
        return
    storage = savepoint_storage(url, s3_endpoint_url=endpoint)
    if storage.read_file(DESCRIPTION) is not None:
        raise CheckpointError(f"savepoint {url} exists already")


def bootstrap_state(
    df: DataFrame,
    spec: str,
    operator: str,
    *,
    key: str,
    value: str,
    out: str,
    params: dict[str, str] | None = None,
    workers: int = 1,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write the savepoint `out`: operator `operator` of job `spec` (with `params`,
    planned at `workers`) holds, for each row of `df`, the value of column
    `value` under the key of column `key` (its default value state, what
    ``state.get()`` returns).

    Raises one line: `SpecError` for a job that does not load, `ConfigurationError`
    for an unknown operator (the known listed), a key column with nulls or
    duplicates (their counts), a value the job's state serde cannot encode (the
    first such row); `CheckpointError` for a target that holds anything.
    """
    job = load_job(spec, params or {})
    planned = plan(job, workers)
    identity: JobIdentity = identity_of(planned)
    names = state_names(job)
    op = resolve_operator(operator, names, f"job {spec}")
    stage = stage_of(op)
    url = normal_url(out)
    refuse_existing(url, s3_endpoint_url)
    target = Target(
        url, s3_endpoint_url, op, stage, planned.parallelism[stage], job.max_parallelism,
        job.state_serde, identity.fingerprint,
    )  # fmt: skip
    info = SavepointInfo(
        version=FORMAT_VERSION,
        job=job.name,
        checkpoint=BOOTSTRAP_CHECKPOINT,
        identity=identity,
        max_parallelism=job.max_parallelism,
        parallelism=planned.parallelism,
        state_serde=job.state_serde.name,
        # A stamp shown to people (when the savepoint was made), never compared.
        time=time.time(),
        states=names,
    )

    def empty_snapshots(storage: ManagedCheckpointStorage) -> None:
        # The other subtasks hold no state and no offsets: sources start as a new job's.
        for s, parallelism in enumerate(planned.parallelism):
            if s != stage:
                for i in range(parallelism):
                    storage.store(_meta(target, f"s{s}-{i}", parallelism, 0, False), None, {})

    return write_state(
        df.select(key, value), target, info, empty_snapshots, f"state serde of job {spec}"
    )


def write_state(
    pairs: DataFrame,
    target: Target,
    info: SavepointInfo,
    others: Callable[[ManagedCheckpointStorage], None],
    serde_of: str,
) -> BootstrapResult:
    """Write the savepoint `target.url`: `pairs` (columns key, value; checked first)
    as operator `target.op`'s value state, then `others` (the other subtasks'
    snapshots), then `info` as ``savepoint.json``, last. On failure a local
    target is removed; `serde_of` names the serde in the refusal of a value."""
    key = pairs.columns[0]
    _check_keys(pairs, key)
    bad = pairs.rdd.mapPartitions(lambda rows: _unencodable(target, rows)).take(1)
    if bad:
        raise StateValueError(
            f"{serde_of} ({target.serde.name}) cannot encode the value of {bad[0]}"
        )
    k, p = target.max_parallelism, target.parallelism
    url = target.url
    try:
        written = dict(
            pairs.rdd.map(lambda r: (group_of(key_bytes(r[0]), k), (r[0], r[1])))
            .partitionBy(p, lambda g: owner(g, k, p))
            .mapPartitionsWithIndex(lambda i, rows: _write_subtask(target, i, rows))
            .collect()
        )
        storage = savepoint_storage(url, s3_endpoint_url=target.s3_endpoint_url, create=True)
        others(storage)
        storage.write_file(DESCRIPTION, info.to_json().encode())
    except BaseException:
        if url.startswith("file://"):
            shutil.rmtree(urlsplit(url).path, ignore_errors=True)
        raise
    return BootstrapResult(url, target.op, written)
