"""A savepoint built from a DataFrame: keyed state prepared from history.

`bootstrap_state` writes a savepoint that ``kstream run --from-savepoint``
takes as it takes any other: the layout and manifests of
`kstream.runtime.checkpoint.savepoint`, the identity of the job it will be
started with (planned from its spec and parameters at `workers`), and the
operator's state in key format 3: its default value state, and named value,
map and list states (`StateRows`), each written through the runtime's own
state classes, so the bytes are the ones the job itself would have written.

One call writes one operator's states, all of them, into a new savepoint
(`bootstrap_states`); a target that holds anything is refused, so a
savepoint is never extended by a second call. Window state and timers are
not bootstrapped: a window's entry is a ``(start, end)`` tuple and its value
a ``(contents, emitted)`` pair whose contents only the job's window function
gives meaning to, and a window is emitted and dropped by two timers (its end,
its end plus the allowed lateness) that would have to be written beside it.
Named state names are not declared by a job (``ctx.map("seen")`` makes the
state on first use), so a name the job never uses cannot be told apart:
such state is written, and never read.

Order of work, so that nothing half-written ever looks complete:

1. on the driver, the job is planned and the operator resolved (one line if unknown);
2. Spark jobs check every state's rows (null keys, entries or indexes, duplicated
   keys, (key, entry) or (key, index) pairs, a list's indexes not 0..n-1:
   refused with their counts) and encode every key, map entry and value with
   the job's state serde (the first it cannot encode is refused, with its key);
3. the rows are partitioned by owner subtask (``key group * P // K``; sorted
   by key and list index unless the only state is a value state) and each
   Spark task builds its subtask's RocksDB database with the runtime's own
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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rocksdict import Rdict

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
from kstream.runtime.state.element import TIMERS_STATE
from kstream.runtime.state.keyed import KeyedStateContext
from kstream.runtime.state.store import KEY_FORMAT, StateStore, key_bytes, state_options
from kstream.tools.spec import load_job
from kstream.tools.state.decode import WINDOWS_STATE, StateKind
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
    "StateRows",
    "Target",
    "Written",
    "bootstrap_state",
    "bootstrap_states",
    "check_kind",
    "check_states",
    "clear",
    "copy_subtask",
    "fill",
    "refuse_existing",
    "write_state",
]

#: The checkpoint id of a bootstrapped savepoint (an import renumbers it anyway).
BOOTSTRAP_CHECKPOINT = 1
#: Rows written to the cache between flushes into RocksDB.
FLUSH_EVERY = 100_000
#: The kinds a bootstrap writes.
WRITABLE = (StateKind.VALUE, StateKind.MAP, StateKind.LIST)


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """The savepoint written: its URL, the state name, and keys per subtask (a key
    holding several states, or a map or list of several entries, counts once)."""

    url: str
    op: str
    keys: dict[str, int]


@dataclass(frozen=True, slots=True)
class Written:
    """One state a bootstrap writes (pickled to the executors).

    `kind` VALUE with `name` None: the operator's default value state
    (``ctx.get()``); VALUE with a name: ``ctx.value(name)``; MAP, LIST:
    ``ctx.map(name)``, ``ctx.list(name)``. `json_values`: the value column
    holds JSON text, decoded before it is encoded.
    """

    kind: StateKind = StateKind.VALUE
    name: str | None = None
    json_values: bool = False

    @property
    def label(self) -> str:
        """How refusals name it: ``map state 'seen'``."""
        if self.name is None:
            return "the default value state"
        return f"{self.kind.value} state {self.name!r}"


@dataclass(frozen=True, slots=True)
class StateRows:
    """One state of an operator and the DataFrame of its rows, for `bootstrap_states`.

    Columns (named by the fields; their defaults are what `read_state` gives):
    value: `key`, `value`; map: `key`, `entry`, `value` (one row per entry);
    list: `key`, `index`, `value` (one row per element, indexes 0..n-1 per key).
    A key or entry is written as the column holds it: a STRING is a str (cast
    the column for another type). A struct arrives as a dict, an array as a
    list; with `json_values` the value column is JSON text (read_state's
    default), decoded first.
    """

    df: DataFrame
    kind: StateKind | str = StateKind.VALUE
    name: str | None = None
    key: str = "key"
    value: str = "value"
    entry: str = "entry"
    index: str = "index"
    json_values: bool = False

    def written(self) -> Written:
        return Written(StateKind(self.kind), self.name, self.json_values)

    def columns(self) -> list[str]:
        """The columns written, in the order `write_state` takes them."""
        kind = StateKind(self.kind)
        if kind is StateKind.MAP:
            return [self.key, self.entry, self.value]
        if kind is StateKind.LIST:
            return [self.key, self.index, self.value]
        return [self.key, self.value]


@dataclass(frozen=True, slots=True)
class Target:
    """What every writing task needs (pickled to the executors).

    `base`: a savepoint whose snapshots of the operator's stage give the written
    ones their offsets, watermarks, sink payloads and databases, the written
    states cleared from them (a transform: `clear`); None: a new job's (no
    offsets, empty databases). `states`: the states written, in the order of the
    frames given to `write_state`.
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
    states: tuple[Written, ...] = (Written(),)


def _plain(value: Any) -> Any:
    """A Spark value as the job would hold it: Rows as dicts, recursively."""
    as_dict = getattr(value, "asDict", None)
    return as_dict(recursive=True) if as_dict is not None else value


def _value(w: Written, value: Any) -> Any:
    """A value of the DataFrame as the job holds it."""
    if w.json_values and isinstance(value, str):
        return json.loads(value)
    return _plain(value)


def _meta(t: Target, task: str, parallelism: int, size: int, has_state: bool) -> SnapshotMeta:
    return SnapshotMeta(
        checkpoint=t.checkpoint, generation=0, task=task, has_state=has_state,
        size=size, identity=t.fingerprint, state_serde=t.serde.name, key_format=KEY_FORMAT,
        max_parallelism=t.max_parallelism, parallelism=parallelism,
    )  # fmt: skip


def _writer(ctx: KeyedStateContext, w: Written) -> Callable[[Any, Any], None]:
    """How one row (entry or index, value) of state `w` is written for ``ctx.key``."""
    if w.kind is StateKind.VALUE:
        state = ctx if w.name is None else ctx.value(w.name)
        return lambda _, v: state.set(v)
    assert w.name is not None
    if w.kind is StateKind.MAP:
        entries = ctx.map(w.name)
        return lambda e, v: entries.put(_plain(e), v)
    elements = ctx.list(w.name)
    # Rows come sorted by index and indexes are checked to be 0..n-1: appending
    # them in order puts each at its index, with the list's length.
    return lambda _, v: elements.append(v)


#: A row on its way to a subtask: ((key group, key bytes, state, list index), (entry, value)).
_Row = tuple[tuple[int, bytes, int, int], tuple[Any, Any]]


def fill(store: StateStore, op: str, states: Sequence[Written], rows: Iterable[_Row]) -> int:
    """Write `rows` as operator `op`'s `states` into `store` (flushed every
    `FLUSH_EVERY` rows, not at the end); return the number of keys.

    A row is ``((key group, key bytes, i, list index), (entry, value))`` of
    ``states[i]``. The rows of one key must come together, and a list's in
    index order, starting at 0 without gaps (what `write_state` sorts and checks).
    """
    ctx = store.context(op)
    writers = [_writer(ctx, w) for w in states]
    keys = 0
    last: tuple[int, bytes] | None = None
    for n, ((g, kb, i, _), (entry, value)) in enumerate(rows, 1):
        if (g, kb) != last:
            last = (g, kb)
            keys += 1
            ctx.key = g.to_bytes(2, "big") + kb
        writers[i](entry, _value(states[i], value))
        if n % FLUSH_EVERY == 0:
            store.flush()
    return keys


def _prefix(op: str, w: Written) -> bytes:
    """The RocksDB key prefix of state `w` of operator `op`, after the key group."""
    return (op if w.name is None else f"{op}.{w.name}").encode() + b"\x00"


def clear(db: Rdict, op: str, states: Sequence[Written], max_parallelism: int) -> None:
    """Delete every entry of operator `op`'s `states` (all keys) from `db` (key
    format 3, `max_parallelism` key groups); every other entry is left as it is.

    One range deletion per state and key group holding anything: a state's
    entries are ``<g><prefix>…``, and the prefix ends with NUL, so they are the
    keys from ``<g><prefix>`` up to, not including, the prefix with its NUL
    made 1. A list's length goes with its elements (its entry is ``b""``).
    """
    prefixes = [_prefix(op, w) for w in states]
    it = db.iter()
    g = 0
    while g < max_parallelism:
        it.seek(g.to_bytes(2, "big"))
        if not it.valid():
            break
        # The next key group holding anything: groups without keys are skipped.
        g = int.from_bytes(it.key()[:2], "big")
        at = g.to_bytes(2, "big")
        for p in prefixes:
            db.delete_range(at + p, at + p[:-1] + b"\x01")
        g += 1
    del it


def _base_db(t: Target, task: str, db: Path) -> tuple[ManagedCheckpointStorage, SnapshotMeta]:
    """Fetch subtask `task`'s database of the transformed savepoint `t.base` into
    `db`, without the states `t.states` (they are written anew); return the
    base's storage and the subtask's description."""
    assert t.base is not None
    base = open_snapshot_storage(t.base)
    _check_intact(base, t.base, task)
    kept = base.load(t.base.checkpoint, task)
    if base.fetch_db(t.base.checkpoint, task, db):
        # The database's own files, copied or linked (RocksDB writes no table
        # file twice): the base savepoint is never changed.
        rdb = Rdict(str(db), state_options(), column_families={"default": state_options()})
        try:
            clear(rdb, t.op, t.states, t.max_parallelism)
        finally:
            rdb.close()
    return base, kept


def _write_subtask(t: Target, index: int, rows: Iterable[_Row]) -> Iterator[tuple[str, int]]:
    """Build subtask `index`'s database from its rows and store it in the
    savepoint; yield (task, keys). With a base (a transform), the database
    starts as the base subtask's without the states written."""
    task = f"s{t.stage}-{index}"
    work = Path(tempfile.mkdtemp(prefix=f"kstream-bootstrap-{task}-"))
    try:
        based = _base_db(t, task, work / "db") if t.base is not None else None
        store = StateStore(work / "db", t.serde, t.max_parallelism)
        keys = fill(store, t.op, t.states, rows)
        size = store.checkpoint(work / "staged")
        store.close()
        meta, payloads = _meta(t, task, t.parallelism, size, True), {}
        if t.base is not None:
            assert based is not None
            base, kept = based
            meta = replace(kept, has_state=True, size=size, state_serde=t.serde.name,
                           key_format=KEY_FORMAT)  # fmt: skip
            payloads = base.load_payloads(t.base.checkpoint, task)
        storage = savepoint_storage(t.url, s3_endpoint_url=t.s3_endpoint_url, create=True)
        storage.store(meta, work / "staged", payloads)
        yield task, keys
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


def _unencodable(t: Target, w: Written, rows: Iterable[Any]) -> Iterator[str]:
    """One line for the first row of `rows` (key, [entry,] value) of state `w` whose
    key, map entry or value cannot be encoded."""
    for row in rows:
        key, value = row[0], row[-1]
        what = "key"
        try:
            key_bytes(_plain(key))
            if w.kind is StateKind.MAP:
                what = "entry"
                t.serde.dumps(_plain(row[1]))
            what = "value"
            t.serde.dumps(_value(w, value))
        except (TypeError, ValueError, OverflowError) as exc:
            shown = {"key": key, "entry": row[1], "value": value}[what]
            yield f"the {what} of key {key!r}: a {type(shown).__name__} {what} ({exc})"
            return


def _first_unencodable(t: Target, w: Written) -> Callable[[Iterable[Any]], Iterator[str]]:
    return lambda rows: _unencodable(t, w, rows)


def _check_rows(df: DataFrame, w: Written) -> None:
    """Refuse `df`'s rows (key, [entry or index,] value) for state `w` with their
    counts: null keys, entries or indexes; duplicated keys or pairs; list indexes
    that are not 0..n-1 for a key."""
    from pyspark.sql import functions as sf

    key, *middle = df.columns[:-1]
    sub = middle[0] if middle else None
    nulls = df.filter(sf.col(key).isNull()).count()
    sub_nulls = df.filter(sf.col(sub).isNull()).count() if sub else 0
    together = [key, *middle]
    dup = (
        df.dropna(subset=together)
        .groupBy(*together)
        .count()
        .filter(sf.col("count") > 1)
        .agg(sf.count("*").alias("keys"), sf.sum("count").alias("rows"))
        .collect()[0]
    )
    keys, rows = dup["keys"], dup["rows"] or 0
    problems = [f"{nulls} null keys"]
    if w.kind is StateKind.VALUE:
        problems.append(f"{keys} duplicated keys ({rows} rows)")
        hint = "a state has one value per key; aggregate or filter first"
    elif w.kind is StateKind.MAP:
        problems.append(f"{sub_nulls} null entries")
        problems.append(f"{keys} duplicated (key, entry) pairs ({rows} rows)")
        hint = "a map has one value per entry; aggregate or filter first"
    else:
        problems.append(f"{sub_nulls} null indexes")
        problems.append(f"{keys} duplicated (key, index) pairs ({rows} rows)")
        hint = "a list's indexes are 0, 1, ..., n-1 for each key"
    gapped = 0
    if w.kind is StateKind.LIST and sub is not None and not (nulls or sub_nulls or keys):
        gapped = (
            df.groupBy(key)
            .agg(sf.min(sub).alias("lo"), sf.max(sub).alias("hi"), sf.count("*").alias("n"))
            .filter((sf.col("lo") != 0) | (sf.col("hi") != sf.col("n") - 1))
            .count()
        )
        problems.append(f"{gapped} keys whose indexes are not 0..n-1")
    if nulls or sub_nulls or keys or gapped:
        listed = ", ".join(problems[:-1]) + " and " + problems[-1]
        what = f"key column {key!r}" if w.kind is StateKind.VALUE else f"the rows of {w.label}"
        raise ConfigurationError(f"{what} {'has' if w.kind is StateKind.VALUE else 'have'} "
                                 f"{listed}: {hint}")  # fmt: skip


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


def check_kind(kind: StateKind | str, name: str | None, verb: str = "bootstrap") -> StateKind:
    """The kind of a state to write (by a `verb`: bootstrap or transform); one line
    for an unknown kind, a window or timer, a map or list without a name, a name
    that is empty, holds NUL or is the runtime's (``timers``, ``windows``)."""
    done = f"{verb}ped" if verb.endswith("p") else f"{verb}ed"
    try:
        k = StateKind(kind)
    except ValueError:
        raise ConfigurationError(
            f"unknown kind of state {kind!r}: choose value, map or list"
        ) from None
    if k not in WRITABLE:
        raise ConfigurationError(
            f"{k.value} state is not {done} (only value, map and list state): "
            "a window or timer holds what only the job's own functions make"
        )
    if name is None and k is not StateKind.VALUE:
        raise ConfigurationError(f"a {k.value} state needs a name (--state NAME)")
    if name is not None and (not name or "\x00" in name):
        raise ConfigurationError(f"state name {name!r} must be non-empty, without NUL")
    if name in (TIMERS_STATE, WINDOWS_STATE):
        raise ConfigurationError(
            f"state name {name!r} is the runtime's ({name} of a keyed or window "
            f"operator): it is not {done}"
        )
    return k


def check_states(states: Sequence[StateRows], op: str, verb: str = "bootstrap") -> None:
    """One line for a set of states that cannot be written (by a `verb`:
    bootstrap or transform): none, a kind or name `check_kind` refuses, a name
    twice, a column missing."""
    if not states:
        raise ConfigurationError(f"no state given to {verb} for {op}")
    seen: set[str | None] = set()
    for s in states:
        check_kind(s.kind, s.name, verb)
        if s.name in seen:
            shown = "the default value state" if s.name is None else f"state {s.name!r}"
            raise ConfigurationError(f"{shown} of {op} is given twice: give each state once")
        seen.add(s.name)
        missing = [c for c in s.columns() if c not in s.df.columns]
        if missing:
            raise ConfigurationError(
                f"the rows of {s.written().label} have no column {', '.join(map(repr, missing))}"
                f" (columns: {', '.join(s.df.columns)})"
            )


def bootstrap_state(
    df: DataFrame,
    spec: str,
    operator: str,
    *,
    key: str = "key",
    value: str = "value",
    out: str,
    kind: StateKind | str = StateKind.VALUE,
    state: str | None = None,
    entry: str = "entry",
    index: str = "index",
    json_values: bool = False,
    params: dict[str, str] | None = None,
    workers: int = 1,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write the savepoint `out`: operator `operator` of job `spec` (with `params`,
    planned at `workers`) holds one state, made of `df`'s rows.

    `kind` value (default) and `state` None: each row's column `value` becomes
    the operator's default value state of its column `key` (what
    ``state.get()`` returns); with a `state` name, ``ctx.value(state)``.
    `kind` map: rows (key, entry, value) make ``ctx.map(state)``; list: rows
    (key, index, value) make ``ctx.list(state)``. See `StateRows` for the
    columns and `bootstrap_states` for several states and the refusals.
    """
    rows = StateRows(df, kind, state, key, value, entry, index, json_values)
    return bootstrap_states([rows], spec, operator, out=out, params=params, workers=workers,
                            s3_endpoint_url=s3_endpoint_url)  # fmt: skip


def bootstrap_states(
    states: Sequence[StateRows],
    spec: str,
    operator: str,
    *,
    out: str,
    params: dict[str, str] | None = None,
    workers: int = 1,
    s3_endpoint_url: str = "",
) -> BootstrapResult:
    """Write the savepoint `out`: operator `operator` of job `spec` (with `params`,
    planned at `workers`) holds `states`, each a DataFrame of rows of one of its
    states (default or named value, named map or list: `StateRows`).

    One call writes the whole savepoint: every state of the operator it is to
    hold is given here; `out` must be a new location.

    Raises one line, before anything is written: `SpecError` for a job that
    does not load; `ConfigurationError` for an unknown operator (the known
    listed), a window or timer kind, a map or list without a name, a reserved
    name (``timers``, ``windows``), a state given twice, a missing column, rows
    with null keys, entries or indexes, duplicated keys, (key, entry) or (key,
    index) pairs, or a key whose list indexes are not 0..n-1 (their counts);
    `StateValueError` for a key, map entry or value the job's state serde
    cannot encode (the first such row); `CheckpointError` for a target that
    holds anything.
    """
    job = load_job(spec, params or {})
    planned = plan(job, workers)
    identity: JobIdentity = identity_of(planned)
    names = state_names(job)
    op = resolve_operator(operator, names, f"job {spec}")
    check_states(states, op)
    stage = stage_of(op)
    url = normal_url(out)
    refuse_existing(url, s3_endpoint_url)
    target = Target(
        url, s3_endpoint_url, op, stage, planned.parallelism[stage], job.max_parallelism,
        job.state_serde, identity.fingerprint, states=tuple(s.written() for s in states),
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

    frames = [s.df.select(*s.columns()) for s in states]
    return write_state(frames, target, info, empty_snapshots, f"state serde of job {spec}")


def _keyed(w: Written, i: int, k: int) -> Callable[[Any], _Row]:
    """A row (key, [entry or index,] value) of state number `i` as a `_Row`."""

    def keyed(r: Any) -> _Row:
        kb = key_bytes(_plain(r[0]))
        at = int(r[1]) if w.kind is StateKind.LIST else 0
        entry = r[1] if w.kind is StateKind.MAP else None
        return (group_of(kb, k), kb, i, at), (entry, r[-1])

    return keyed


def write_state(
    frames: Sequence[DataFrame],
    target: Target,
    info: SavepointInfo,
    others: Callable[[ManagedCheckpointStorage], None],
    serde_of: str,
) -> BootstrapResult:
    """Write the savepoint `target.url`: each of `frames` (columns key, [entry or
    index,] value; checked first) as operator `target.op`'s state
    ``target.states[i]``, then `others` (the other subtasks' snapshots), then
    `info` as ``savepoint.json``, last. On failure a local target is removed;
    `serde_of` names the serde in the refusal of a value."""
    for df, w in zip(frames, target.states, strict=True):
        _check_rows(df, w)
    for df, w in zip(frames, target.states, strict=True):
        bad = df.rdd.mapPartitions(_first_unencodable(target, w)).take(1)
        if bad:
            of = "" if w.name is None and w.kind is StateKind.VALUE else f" ({w.label})"
            raise StateValueError(f"{serde_of} ({target.serde.name}) cannot encode {bad[0]}{of}")
    k, p = target.max_parallelism, target.parallelism
    url = target.url
    rdds = [
        df.rdd.map(_keyed(w, i, k))
        for i, (df, w) in enumerate(zip(frames, target.states, strict=True))
    ]
    rows = rdds[0] if len(rdds) == 1 else rdds[0].context.union(rdds)
    one_value = len(target.states) == 1 and target.states[0].kind is StateKind.VALUE
    try:
        if one_value:
            # One row per key: no order needed.
            parted = rows.partitionBy(p, lambda at: owner(at[0], k, p))
        else:
            # A key's rows together, a list's in index order (`_write_subtask`).
            parted = rows.repartitionAndSortWithinPartitions(p, lambda at: owner(at[0], k, p))
        written = dict(
            parted.mapPartitionsWithIndex(lambda i, rs: _write_subtask(target, i, rs)).collect()
        )
        storage = savepoint_storage(url, s3_endpoint_url=target.s3_endpoint_url, create=True)
        others(storage)
        storage.write_file(DESCRIPTION, info.to_json().encode())
    except BaseException:
        if url.startswith("file://"):
            shutil.rmtree(urlsplit(url).path, ignore_errors=True)
        raise
    return BootstrapResult(url, target.op, written)
